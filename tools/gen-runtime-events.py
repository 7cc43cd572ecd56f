#!/usr/bin/env python3
"""Writes data/runtime-events.xml, dntrace's layouts of the runtime's own events, from the
runtime's ETW manifest (dotnet/runtime src/coreclr/vm/ClrEtwAll.man; not kept in this repo).

    tools/gen-runtime-events.py ClrEtwAll.man > data/runtime-events.xml

Every event of the runtime's providers (DotNETRuntime, Rundown, Private, Stress) becomes one
<event> per (id, version) with its provider GUID, task, opcode, level, keywords and fields in
payload order. Names follow TraceEvent and PerfView ("GC/Start", "Method/LoadVerbose": task,
then opcode) so that a user can move between the tools: the manifest's task and opcode names
are shortened by TraceEvent's rules below, and the names its parser spells otherwise are in
RENAMES. tools/runtime-events-extra.xml (our own, hand-written: providers the manifest lacks and
events newer than the manifest given) is appended as it is; an event it repeats replaces the
manifest's when dntrace loads the file.
"""
import re
import sys
import xml.etree.ElementTree as ET
from xml.sax.saxutils import quoteattr

NS = "{http://schemas.microsoft.com/win/2004/08/events}"
PROVIDERS = (
    "Microsoft-Windows-DotNETRuntime",
    "Microsoft-Windows-DotNETRuntimeRundown",
    "Microsoft-Windows-DotNETRuntimePrivate",
    "Microsoft-Windows-DotNETRuntimeStress",
)
LEVELS = {"win:LogAlways": 0, "win:Critical": 1, "win:Error": 2, "win:Warning": 3,
          "win:Informational": 4, "win:Verbose": 5}
# The standard opcodes (winmeta.xml): name and value.
WIN_OPCODES = {"win:Info": ("", 0), "win:Start": ("Start", 1), "win:Stop": ("Stop", 2),
               "win:DC_Start": ("DCStart", 3), "win:DC_Stop": ("DCStop", 4),
               "win:Extension": ("Extension", 5), "win:Reply": ("Reply", 6),
               "win:Resume": ("Resume", 7), "win:Suspend": ("Suspend", 8),
               "win:Send": ("Send", 9), "win:Receive": ("Receive", 240)}
# Manifest in-types to dntrace schema types (see the comment at the top of the output).
TYPES = {"win:UInt8": "Byte", "win:Int8": "SByte", "win:UInt16": "UInt16", "win:Int16": "Int16",
         "win:UInt32": "UInt32", "win:Int32": "Int32", "win:UInt64": "UInt64",
         "win:Int64": "Int64", "win:Double": "Double", "win:Float": "Single",
         "win:Boolean": "Boolean", "win:GUID": "Guid", "win:Pointer": "Pointer",
         "win:UnicodeString": "String", "win:AnsiString": "AnsiString", "win:Binary": "Binary"}
# TraceEvent's task names where they are not the manifest's with "CLR" and "Rundown" cut off.
TASKS = {"GarbageCollection": "GC", "CLRStack": "ClrStack", "CLRStackWalkStress": "StackWalk",
         "CLRStackStress": "ClrStack", "CLRStackPrivate": "ClrStack",
         "GarbageCollectionPrivate": "GC", "CLRRuntimeInformation": "Runtime",
         "CLRRuntimeInformationRundown": "Runtime", "CLRStackRundown": "ClrStack",
         "CLRPerfTrackRundown": "ClrPerfTrack", "CLRPerfTrackPrivate": "ClrPerfTrack",
         "CLRPerfTrack": "ClrPerfTrack",
         "CLRAuthenticodeVerification": "AuthenticodeVerification",
         "ExceptionCatch": "ExceptionCatch"}
# Names TraceEvent's parsers spell otherwise than these rules (typos included) ((provider, id): name), checked against TraceEvent
# 3.2.8's templates (tests/bench-traceevent prints the names it gives a trace's events).
RT, RD, PV = PROVIDERS[0], PROVIDERS[1], PROVIDERS[2]
RENAMES = {
    (RT, 28): "GC/MarkCards",
    (RT, 31): "GC/DestoryGCHandle",
    (RT, 72): "Method/MethodDetails",
    (RT, 82): "ClrStack/Walk",
    (RT, 83): "AppDomainResourceManagement/MemAllocated",
    (RT, 84): "AppDomainResourceManagement/MemSurvived",
    (RT, 87): "AppDomainResourceManagement/DomainEnter",
    (RT, 88): "ILStub/StubGenerated",
    (RT, 89): "ILStub/StubCacheHit",
    (RT, 135): "Method/DCStartCompleteV2",
    (RT, 136): "Method/DCStopCompleteV2",
    (RT, 137): "Method/DCStartV2",
    (RT, 138): "Method/DCStopV2",
    (RT, 139): "Method/DCStartVerboseV2",
    (RT, 140): "Method/DCStopVerboseV2",
    (RT, 149): "Loader/ModuleDCStartV2",
    (RT, 150): "Loader/ModuleDCStopV2",
    (RT, 152): "Loader/ModuleLoad",
    (RT, 153): "Loader/ModuleUnload",
    (RT, 159): "Method/R2RGetEntryPoint",
    (RT, 185): "Method/InliningSucceeded",
    (RT, 186): "Method/InliningFailedAnsi",
    (RT, 188): "Method/TailCallSucceeded",
    (RT, 189): "Method/TailCallFailed",
    (RT, 192): "Method/InliningFailed",
    (RT, 270): "EventSourceEvent",
    (RT, 283): "TieredCompilation/BackgroundJitStart",
    (RT, 284): "TieredCompilation/BackgroundJitStop",
    (PV, 7): "GC/MarkStackRoots",
    (PV, 8): "GC/MarkFinalizeQueueRoots",
    (PV, 9): "GC/MarkHandles",
    (PV, 10): "GC/MarkCards",
    (PV, 12): "GC/BGC1stNonCondStop",
    (PV, 82): "Startup/EEConfigSetupStart",
    (PV, 84): "Startup/LoadSystemBasesStart",
    (PV, 86): "Startup/ExecExeStart",
    (PV, 88): "Startup/MainStart",
    (PV, 92): "Startup/LdLibShFolderStart",
    (PV, 94): "Startup/PrestubWorkerStart",
    (PV, 98): "Startup/OpenHModuleStart",
    (PV, 102): "Startup/ParseXmlStart",
    (PV, 104): "Startup/InitDefaultDomainStart",
    (PV, 106): "Startup/InitSecurityStart",
    (PV, 108): "Startup/AllowBindingRedirsStart",
    (PV, 110): "Startup/EEConfigSyncStart",
    (PV, 112): "Startup/BindingStart",
    (PV, 113): "Startup/BindingStop",
    (PV, 114): "Startup/LoaderCatchCallStart",
    (PV, 116): "Startup/FusionInitStart",
    (PV, 118): "Startup/FusionAppCtxStart",
    (PV, 120): "Startup/Fusion2EEStart",
    (PV, 122): "Startup/SecurityCatchCallStart",
    (PV, 151): "ClrStack/Walk",
    (PV, 158): "ClrPerfTrack/ModuleRangeLoad",
    (PV, 163): "Binding/LoopupAndProbingPhaseStart",
    (PV, 175): "Binding/LoaderDeliverEventPhaseStart",
    (PV, 177): "EvidenceGeneration/EvidenceGenerated",
    (PV, 178): "Transparency/ModuleTransparencyComputationStart",
    (PV, 179): "Transparency/ModuleTransparencyComputationStop",
    (PV, 180): "Transparency/TypeTransparencyComputationStart",
    (PV, 181): "Transparency/TypeTransparencyComputationStop",
    (PV, 182): "Transparency/MethodTransparencyComputationStart",
    (PV, 183): "Transparency/MethodTransparencyComputationStop",
    (PV, 184): "Transparency/FieldTransparencyComputationStart",
    (PV, 185): "Transparency/FieldTransparencyComputationStop",
    (PV, 186): "Transparency/TokenTransparencyComputationStart",
    (PV, 187): "Transparency/TokenTransparencyComputationStop",
    (PV, 191): "FailFast",
    (PV, 192): "GC/FinalizeObject",
    (PV, 193): "GC/CCWRefCountChangeAnsi",
    (PV, 201): "ClrMulticoreJit/Common",
    (PV, 202): "ClrMulticoreJit/MethodCodeReturned",
    (PV, 310): "LoaderHeap/AllocRequest",
    (PV, 400): "ClrDynamicTypeUsage/IInspectableRuntimeClassName",
    (PV, 401): "ClrDynamicTypeUsage/WinRTUnbox",
    (PV, 402): "ClrDynamicTypeUsage/CreateRCW",
    (PV, 403): "ClrDynamicTypeUsage/RCWVariance",
    (PV, 404): "ClrDynamicTypeUsage/RCWIEnumerableCasting",
    (PV, 405): "ClrDynamicTypeUsage/CreateCCW",
    (PV, 406): "ClrDynamicTypeUsage/CCWVariance",
    (PV, 407): "ClrDynamicTypeUsage/ObjectVariantMarshallingToNative",
    (PV, 408): "ClrDynamicTypeUsage/GetTypeFromGUID",
    (PV, 409): "ClrDynamicTypeUsage/GetTypeFromProgID",
    (PV, 410): "ClrDynamicTypeUsage/ConvertToCallbackEtw",
    (PV, 411): "ClrDynamicTypeUsage/BeginCreateManagedReference",
    (PV, 412): "ClrDynamicTypeUsage/EndCreateManagedReference",
    (PV, 413): "ClrDynamicTypeUsage/ObjectVariantMarshallingToManaged",
    (RD, 0): "ClrStack/Walk",
    (RD, 149): "Method/ILToNativeMapDCStart",
    (RD, 150): "Method/ILToNativeMapDCStop",
    (RD, 153): "Loader/ModuleDCStart",
    (RD, 154): "Loader/ModuleDCStop",
    (RD, 159): "Loader/ThreadDCStop",
    (RD, 280): "TieredCompilationRundown/SettingsDCStart",
}


def task_name(task):
    if task in TASKS:
        return TASKS[task]
    t = task
    for suffix in ("Rundown", "Private"):
        if t.endswith(suffix) and t != suffix:
            t = t[: -len(suffix)]
    if t.startswith("CLR"):
        t = t[3:]
    return t


def opcode_name(opcode, task_short):
    """TraceEvent's opcode names: the task's prefix cut ("GCHeapStats" in task GC: "HeapStats"),
    Begin and End as Start and Stop."""
    o = opcode
    for prefix in (task_short, "GC", "Method", "Module", "CLR"):
        if o.startswith(prefix) and len(o) > len(prefix) and o[len(prefix)].isupper():
            o = o[len(prefix):]
            break
    o = re.sub(r"Begin(?=[A-Z]|$)", "Start", o)
    o = re.sub(r"End(?=[A-Z]|$)", "Stop", o)
    return o


def fields_xml(elem, out, indent):
    for d in elem:
        if d.tag == NS + "data":
            t = d.get("inType")
            if t not in TYPES:
                sys.exit(f"gen-runtime-events: unknown inType {t} in {d.get('name')}")
            attrs = f'name={quoteattr(d.get("name"))} type="{TYPES[t]}"'
            if d.get("count"):
                attrs += f' count={quoteattr(d.get("count"))}'
            if d.get("length"):
                attrs += f' length={quoteattr(d.get("length"))}'
            out.append(f"{indent}<field {attrs}/>")
        elif d.tag == NS + "struct":
            out.append(f'{indent}<struct name={quoteattr(d.get("name"))} count={quoteattr(d.get("count") or "1")}>')
            fields_xml(d, out, indent + "  ")
            out.append(f"{indent}</struct>")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen-runtime-events.py ClrEtwAll.man > data/runtime-events.xml")
    root = ET.parse(sys.argv[1]).getroot()
    out = []
    for prov in root.iter(NS + "provider"):
        pname = prov.get("name")
        if pname not in PROVIDERS:
            continue
        guid = prov.get("guid").strip("{}").lower()
        keywords = {k.get("name"): int(k.get("mask"), 16) for k in prov.iter(NS + "keyword")}
        tasks, task_opcodes = {}, {}
        for t in prov.iter(NS + "task"):
            tasks[t.get("name")] = int(t.get("value"))
            for o in t.iter(NS + "opcode"):
                task_opcodes[(t.get("name"), o.get("name"))] = int(o.get("value"))
        prov_opcodes = {}
        for ops in prov.findall(NS + "opcodes"):
            for o in ops.iter(NS + "opcode"):
                prov_opcodes[o.get("name")] = int(o.get("value"))
        templates = {t.get("tid"): t for t in prov.iter(NS + "template")}
        out.append(f"  <provider name={quoteattr(pname)} guid=\"{guid}\">")
        for ev in prov.iter(NS + "event"):
            eid, version = int(ev.get("value")), int(ev.get("version") or 0)
            task, opcode = ev.get("task") or "", ev.get("opcode") or "win:Info"
            if opcode in WIN_OPCODES:
                oshort, ovalue = WIN_OPCODES[opcode]
            else:
                ovalue = task_opcodes.get((task, opcode), prov_opcodes.get(opcode))
                if ovalue is None:
                    sys.exit(f"gen-runtime-events: opcode {opcode} of {ev.get('symbol')} is not defined")
                oshort = opcode_name(opcode, task_name(task))
            tshort = task_name(task) if task else ev.get("symbol")
            name = RENAMES.get((pname, eid), f"{tshort}/{oshort}" if oshort else tshort)
            kw = 0
            for k in (ev.get("keywords") or "").split():
                kw |= keywords[k]
            attrs = (f'id="{eid}" version="{version}" name={quoteattr(name)} symbol={quoteattr(ev.get("symbol"))}'
                     f' task={quoteattr(tshort)} opcode={quoteattr(oshort)} opcode-value="{ovalue}"'
                     f' level="{LEVELS[ev.get("level") or "win:Informational"]}" keywords="0x{kw:x}"')
            tpl = ev.get("template")
            if not tpl:
                out.append(f"    <event {attrs}/>")
                continue
            out.append(f"    <event {attrs}>")
            fields_xml(templates[tpl], out, "      ")
            out.append("    </event>")
        out.append("  </provider>")
    print(HEADER, end="")
    print("\n".join(out))
    extra = open(__file__.rsplit("/", 1)[0] + "/runtime-events-extra.xml").read()
    body = extra[extra.index("<dntrace-schema"):]
    body = body[body.index(">") + 1: body.rindex("</dntrace-schema>")]
    print("  <!-- tools/runtime-events-extra.xml -->" + body.rstrip())
    print("</dntrace-schema>")


HEADER = """<?xml version="1.0" encoding="UTF-8"?>
<!--
  GENERATED by tools/gen-runtime-events.py from the runtime's event manifest (ClrEtwAll.man) and
  tools/runtime-events-extra.xml: edit those, not this file.

  dntrace event schema: the payload layouts of events whose nettrace metadata carries no field
  list (the runtime's own providers). Our format (version 2):

    <provider name="..." guid="...">     one per provider name; the GUID is informative
      <event id="N" version="V" name="Task/Opcode" symbol="..." task="..." opcode="..."
             opcode-value="N" level="N" keywords="0x...">
                                         one per (id, version); a trace's event uses the layout
                                         of its version, else the highest one below it
        <field name="..." type="T"/>     in payload order
        <field name="..." type="T" count="N|FIELD"/>   an array: N elements, or as many as an
                                         earlier field of the same level says
        <field name="..." type="Binary" length="FIELD"/>  that many bytes
        <struct name="..." count="N|FIELD"> fields </struct>   an array of records
      </event>

  Version 1 files (no version=, fields with since="V": present from version V on; like="P/ID"
  copies another event's fields) are still read.

  Types: Boolean (4 bytes), Byte, SByte, Int16, UInt16, Int32, UInt32, Int64, UInt64, Single,
  Double, Guid, String (UTF-16, NUL-terminated), AnsiString (8-bit, NUL-terminated), Binary,
  Pointer (4 or 8 bytes: the trace header's pointer size).
  name is TraceEvent's and PerfView's name of the event; symbol the manifest's (the name
  option of `dntrace events` takes either; the symbol without its _V suffix).
  A layout may stop early: fields past the last one described are left undecoded.
  Give more of these to `dntrace events` with `schema FILE` files of your own (see
  dntrace-events(1)); a later file's event replaces an earlier one's of the same version, and
  an event without version= replaces every version of its id.
-->
<dntrace-schema version="2">
"""

if __name__ == "__main__":
    main()

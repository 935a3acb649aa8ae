#!/usr/bin/env python3
"""Writes the highstate outputter's golden files with Salt's own code.

Each case below becomes CASE.json ({"opts": ..., "data": ...}, keys sorted,
as Halite's CBOR-decoded returns are) and CASE.golden: what Salt 3006's
salt.output.out_format(data, "highstate", opts) prints (salt/output/
highstate.py, with try_printout's fallback to nested), plus print's newline.
highstate_test.go renders CASE.json with Halite's outputter and compares.

Run it from a checkout of Salt 3006 (salt/ importable, with its deps or the
shims described in the report of issue 16):
    PYTHONPATH=/path/to/salt python3 gen.py
Colour codes are written as Halite's nested outputter writes them
(Salt's "\\x1b[0;32m" is "\\x1b[32m": same colour, no leading reset).
"""
import copy
import json
import os
import sys

import salt.config
import salt.output

HERE = os.path.dirname(os.path.abspath(__file__))

SALT_TO_HALITE_COLORS = {
    "\x1b[0;31m": "\x1b[31m",
    "\x1b[0;1;31m": "\x1b[1;31m",
    "\x1b[0;32m": "\x1b[32m",
    "\x1b[0;1;33m": "\x1b[1;33m",
    "\x1b[0;36m": "\x1b[36m",
    "\x1b[0;0m": "\x1b[0m",
}


def st(id_, run, name=None, result=True, changes=None, comment="", sls="web",
       duration=1.0, start="10:11:12.000100", **extra):
    d = {"__id__": id_, "__run_num__": run, "__sls__": sls,
         "changes": changes if changes is not None else {}, "comment": comment,
         "duration": duration, "name": name if name is not None else id_,
         "result": result, "start_time": start}
    d.update(extra)
    return d


WEB = {
    "file_|-motd_|-/etc/motd_|-managed": st(
        "motd", 0, "/etc/motd", changes={"diff": "--- \n+++ \n@@ -1 +1 @@\n-old\n+Welcome to web1\n"},
        comment="File /etc/motd updated", sls="base.motd", duration=12.345),
    "pkg_|-nginx_|-nginx_|-installed": st(
        "nginx", 1, comment="All specified packages are already installed",
        duration=301.2, start="10:11:12.012500"),
    "service_|-nginx-svc_|-nginx_|-running": st(
        "nginx-svc", 2, "nginx", changes={"nginx": True},
        comment="Service nginx has been enabled, and is running", duration=80.0,
        start="10:11:12.314000"),
    "cmd_|-migrate_|-/usr/bin/migrate --all_|-run": st(
        "migrate", 3, "/usr/bin/migrate --all", result=False,
        changes={"pid": 4242, "retcode": 2, "stderr": "error: no database\nhint: start it", "stdout": ""},
        comment='Command "/usr/bin/migrate --all" run', duration=705.5, start="10:11:12.394100"),
    "cmd_|-after_|-echo after_|-run": st(
        "after", 4, "echo after", result=False,
        comment="One or more requisite failed: web.migrate", duration=0.01,
        start="10:11:13.100000"),
}

TEST_RUN = {
    "file_|-motd_|-/etc/motd_|-managed": st(
        "motd", 0, "/etc/motd", result=None,
        changes={"diff": "--- \n+++ \n@@ -1 +1 @@\n-old\n+new\n"},
        comment="The file /etc/motd is set to be changed\nNote: No changes made, actual changes may\nbe different due to other states.",
        duration=3.25),
    "test_|-ok_|-ok_|-succeed_without_changes": st("ok", 1, comment="Success!", duration=0.5),
    "service_|-nginx_|-nginx_|-running": st(
        "nginx", 2, result=None, comment="Service nginx is set to start", duration=20),
}

SALT_JSON_DATA = {  # tests/pytests/unit/output/test_highstate.py json_data
    "data": {"master": {
        "salt_|-call_sleep_state_|-call_sleep_state_|-state": {
            "__id__": "call_sleep_state", "__jid__": "20170418153529810135", "__run_num__": 0,
            "__sls__": "orch.simple",
            "changes": {"out": "highstate", "ret": {
                "minion": {"module_|-simple-ping_|-test.ping_|-run": {
                    "__id__": "simple-ping", "__run_num__": 0, "__sls__": "simple-ping",
                    "changes": {"ret": True}, "comment": "Module function test.ping executed",
                    "duration": 56.179, "name": "test.ping", "result": True,
                    "start_time": "15:35:31.282099"}},
                "sub_minion": {"module_|-simple-ping_|-test.ping_|-run": {
                    "__id__": "simple-ping", "__run_num__": 0, "__sls__": "simple-ping",
                    "changes": {"ret": True}, "comment": "Module function test.ping executed",
                    "duration": 54.103, "name": "test.ping", "result": True,
                    "start_time": "15:35:31.005606"}}}},
            "comment": "States ran successfully. Updating sub_minion, minion.",
            "duration": 1638.047, "name": "call_sleep_state", "result": True,
            "start_time": "15:35:29.762657"},
        "salt_|-cmd_run_example_|-cmd.run_|-function": {
            "__id__": "cmd_run_example", "__jid__": "20200411195112288850", "__run_num__": 1,
            "__sls__": "orch.simple",
            "changes": {"out": "highstate", "ret": {"minion": "file1\nfile2\nfile3"}},
            "comment": "Function ran successfully. Function cmd.run ran on minion.",
            "duration": 412.397, "name": "cmd.run", "result": True, "start_time": "21:51:12.185868"}}},
    "outputter": "highstate", "retcode": 0,
}


def sleeps(parallel):
    d = {
        "test_|-barrier_|-barrier_|-nop": st("barrier", 0, comment="Success!", sls="test.49273",
                                              duration=0.698, start="15:11:31.459770"),
        "test_|-barrier2_|-barrier2_|-nop": st("barrier2", 4, comment="Success!", sls="test.49273",
                                                duration=0.762, start="15:11:41.619874"),
    }
    for i, (pid, dur, start) in enumerate([(524313, 10007.711, "15:11:31.496410"),
                                           (524315, 10007.264, "15:11:31.537001"),
                                           (524317, 10008.646, "15:11:31.577076")], 1):
        s = st("blah-%d" % i, i, "sleep 10", changes={"pid": pid, "retcode": 0, "stdout": "", "stderr": ""},
               comment='Command "sleep 10" run', sls="test.49273", duration=dur, start=start)
        if parallel:
            s["__parallel__"] = True
        d["cmd_|-blah-%d_|-sleep 10_|-run" % i] = s
    return {"local": d}


COMPRESS = {"local": {
    "cmd_|-mix-matched results_|-/bin/false_|-run": st(
        "mix-matched results", 7, "/bin/false", result=False, sls="compress_test",
        changes={"pid": 6554, "retcode": 1, "stderr": "", "stdout": ""}, comment='Command "/bin/false" run',
        duration=8.57, start="15:38:22.666578"),
    "cmd_|-mix-matched results_|-/bin/true_|-run": st(
        "mix-matched results", 6, "/bin/true", sls="compress_test",
        changes={"pid": 6553, "retcode": 0, "stderr": "", "stdout": ""}, comment='Command "/bin/true" run',
        duration=7.728, start="15:38:22.658452"),
    "cmd_|-mix-matched results_|-false_|-run": st(
        "mix-matched results", 5, "false", result=False, sls="compress_test",
        changes={"pid": 6552, "retcode": 1, "stderr": "", "stdout": ""}, comment='Command "false" run',
        duration=7.832, start="15:38:22.650225"),
    "cmd_|-mix-matched results_|-true_|-run": st(
        "mix-matched results", 4, "true", sls="compress_test",
        changes={"pid": 6551, "retcode": 0, "stderr": "", "stdout": ""}, comment='Command "true" run',
        duration=8.538, start="15:38:22.641293"),
    "file_|-one clean one changes_|-/tmp/changes_|-managed": st(
        "one clean one changes", 13, "/tmp/changes", sls="compress_test", changes={"diff": "New file"},
        comment="File /tmp/changes updated", duration=3.17, start="15:38:22.703770"),
    "file_|-one clean one changes_|-/tmp/clean_|-managed": st(
        "one clean one changes", 12, "/tmp/clean", sls="compress_test",
        comment="File /tmp/clean is in the correct state", duration=20.123, start="15:38:22.683450"),
    "test_|-succeed clean_|-bar_|-succeed_without_changes": st(
        "succeed clean", 11, "bar", sls="compress_test", comment="Success!", duration=0.759,
        start="15:38:22.678512"),
    "test_|-succeed clean_|-foo_|-succeed_without_changes": st(
        "succeed clean", 10, "foo", sls="compress_test", comment="Success!", duration=0.676,
        start="15:38:22.677678"),
    "test_|-succeed with changes_|-bar_|-succeed_with_changes": st(
        "succeed with changes", 3, "bar", sls="compress_test",
        changes={"testing": {"new": "Something pretended to change", "old": "Unchanged"}},
        comment="Success!", duration=0.829, start="15:38:22.639625"),
    "test_|-succeed with changes_|-foo_|-succeed_with_changes": st(
        "succeed with changes", 2, "foo", sls="compress_test",
        changes={"testing": {"new": "Something pretended to change", "old": "Unchanged"}},
        comment="Success!", duration=0.809, start="15:38:22.638812"),
}}

NESTED_ORCH = {  # test_highstate.py test_nested_output
    "outputter": "highstate", "retcode": 0,
    "data": {"local_master": {"salt_|-nested_|-state.orchestrate_|-runner": {
        "comment": "Runner function 'state.orchestrate' executed.", "name": "state.orchestrate",
        "start_time": "09:22:53.158742", "result": True, "duration": 980.694, "__run_num__": 0,
        "__jid__": "20180326092253538853", "__sls__": "orch.test.nested", "__id__": "nested",
        "changes": {"return": {"outputter": "highstate", "retcode": 0, "data": {"local_master": {
            "test_|-always-passes-with-changes_|-oinaosf_|-succeed_with_changes": {
                "comment": "Success!", "name": "oinaosf", "start_time": "09:22:54.128415",
                "result": True, "duration": 0.437, "__run_num__": 0, "__sls__": "orch.test.changes",
                "changes": {"testing": {"new": "Something pretended to change", "old": "Unchanged"}},
                "__id__": "always-passes-with-changes"},
            "test_|-always-passes_|-fasdfasddfasdfoo_|-succeed_without_changes": {
                "comment": "Success!", "name": "fasdfasddfasdfoo", "start_time": "09:22:54.128986",
                "result": True, "duration": 0.25, "__run_num__": 1, "__sls__": "orch.test.changes",
                "changes": {}, "__id__": "always-passes"}}}}}}}},
}

MANY = {"cam1": {"test_|-s%02d_|-s%02d_|-nop" % (i, i): st("s%02d" % i, i, comment="Success!", duration=0.25)
                 for i in range(12)}}
MANY["cam1"]["test_|-s03_|-s03_|-nop"]["result"] = False

ODD = {"web1": {
    "module_|-call_|-test.echo_|-run": st(
        "call", 0, "test.echo", changes={"ret": ["a", 1, None, {"k": "v"}]},
        comment=["first", "second"], data=["x", 2]),
    "module_|-dict data_|-dict data_|-run": st(
        "dict data", 1, comment="  padded\n  two lines  \n", data={"k1": "v1", "k2": 2}),
    "module_|-scalar data_|-scalar data_|-run": st("scalar data", 2, comment="c", data=5),
    "file_|-warned_|-/etc/x_|-managed": st(
        "warned", 3, "/etc/x", comment="ok",
        warnings=["'backupname' is deprecated and will be removed in a future release of Salt.",
                  "short one"]),
    "test_|-no start_|-no start_|-nop": {"__id__": "no start", "__run_num__": 4, "__sls__": "web",
                                          "changes": "not a dict", "comment": "no start time", "name": "no start",
                                          "result": True},
    "test_|-strdur_|-strdur_|-nop": st("strdur", 5, comment="duration as text", duration="12.5 ms"),
    "test_|-weird_|-weird_|-nop": st("weird", 6, comment="int result", result=1, duration=""),
}}

MISSING_RUN_NUM = {"web1": {
    "test_|-a_|-a_|-nop": {"__id__": "a", "__sls__": "web", "changes": {}, "comment": "no run num",
                           "name": "a", "result": True, "duration": 1.5, "start_time": "10:00:00.000000"},
    "test_|-b_|-b_|-nop": st("b", 1, comment="Success!"),
}}

CASES = {
    # name: (opts, data)
    "full": ({}, {"web1": WEB}),
    "full-color": ({"color": True}, {"web1": WEB}),
    "terse": ({"state_output": "terse"}, {"web1": WEB}),
    "terse-color": ({"color": True, "state_output": "terse"}, {"web1": WEB}),
    "terse_id": ({"state_output": "terse_id"}, {"web1": WEB}),
    "mixed": ({"state_output": "mixed"}, {"web1": WEB}),
    "mixed_id": ({"state_output": "mixed_id"}, {"web1": WEB}),
    "changes": ({"state_output": "changes"}, {"web1": WEB}),
    "changes_id": ({"state_output": "changes_id"}, {"web1": WEB}),
    "full_id": ({"state_output": "full_id"}, {"web1": WEB}),
    "upper": ({"state_output": "TERSE"}, {"web1": WEB}),
    "unknown-mode": ({"state_output": "bogus"}, {"web1": WEB}),
    "not-verbose": ({"state_verbose": False}, {"web1": WEB}),
    "output-diff": ({"state_output_diff": True}, {"web1": WEB}),
    "no-profile": ({"state_output_profile": False}, {"web1": WEB}),
    "no-profile-terse": ({"state_output_profile": False, "state_output": "terse"}, {"web1": WEB}),
    "pct": ({"state_output_pct": True}, {"web1": WEB}),
    "tabular": ({"state_output": "terse", "state_tabular": True}, {"web1": WEB}),
    "filter": ({"state_output": "filter", "state_output_exclude": "True,", "state_output_terse": ["None", "False"]},
               {"web1": WEB, "test1": TEST_RUN}),
    "test-run": ({}, {"web1": TEST_RUN}),
    "test-run-color": ({"color": True}, {"web1": TEST_RUN}),
    "two-hosts": ({}, {"web1": WEB, "web2": TEST_RUN}),
    "compile-errors": ({}, {"web1": ["Rendering SLS 'base:web' failed: Jinja variable 'x' is undefined",
                                     "No matching sls found for 'nope' in env 'base'"]}),
    "compile-errors-color": ({"color": True}, {"web1": ["Specified SLS nope in saltenv base is not available on the salt master or through a configured fileserver"]}),
    "string-return": ({}, {"web1": "ERROR: something\nsecond line"}),
    "bool-return": ({}, {"web1": True}),
    "int-return": ({}, {"web1": 3}),
    "none-return": ({}, {"web1": None}),
    "empty-dict": ({}, {"web1": {}}),
    "top-none": ({}, None),
    "top-string": ({}, "just a string"),
    "top-list": ({}, ["a", "b"]),
    "top-int": ({}, 42),
    "no-hosts": ({}, {}),
    "missing-changes": ({}, {"web1": {"test_|-a_|-a_|-nop": {"__id__": "a", "__run_num__": 0, "__sls__": "web",
                                                              "comment": "c", "name": "a", "result": True}}}),
    "missing-run-num": ({}, MISSING_RUN_NUM),
    "odd": ({}, ODD),
    "odd-terse": ({"state_output": "terse"}, ODD),
    "many": ({}, MANY),
    "salt-json-data": ({"state_output_pct": True}, SALT_JSON_DATA),
    "salt-json-data-terse": ({"state_output_pct": True, "state_output": "terse"}, SALT_JSON_DATA),
    "salt-parallel": ({"state_output_pct": True}, sleeps(True)),
    "salt-summary": ({"state_output_pct": True}, sleeps(False)),
    "salt-compress": ({"state_compress_ids": True}, COMPRESS),
    "salt-compress-terse_id": ({"state_compress_ids": True, "state_output": "terse_id"}, COMPRESS),
    "salt-nested": ({"state_output_pct": True}, NESTED_ORCH),
    "escapes": ({}, {"evil\x1b[2J": {"test_|-x\x1b[31m_|-n\x1b[0m_|-nop": st("x\x1b[31m", 0, "n\x1b[0m", comment="c\x1b]0;title\x07")}}),
}


def sort_keys(v):
    if isinstance(v, dict):
        return {k: sort_keys(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [sort_keys(e) for e in v]
    return v


def main():
    base = copy.deepcopy(salt.config.DEFAULT_MINION_OPTS)
    base.update({"color": False, "extension_modules": "", "optimization_order": [0, 1, 2]})
    only = set(sys.argv[1:])
    for name, (o, data) in CASES.items():
        if only and name not in only:
            continue
        data = sort_keys(data)
        opts = copy.deepcopy(base)
        opts.update(o)
        with open(os.path.join(HERE, name + ".json"), "w") as f:
            json.dump({"opts": o, "data": data}, f, indent=1)
            f.write("\n")
        out = salt.output.out_format(copy.deepcopy(data), "highstate", opts)
        if not isinstance(out, str):
            out = str(out)
        for a, b in SALT_TO_HALITE_COLORS.items():
            out = out.replace(a, b)
        with open(os.path.join(HERE, name + ".golden"), "w") as f:
            if out:
                f.write(out + "\n")


if __name__ == "__main__":
    main()

package output

import "fmt"

// InSaltOrder returns a function's return with its keys in the order Salt's
// function gives them, for the few functions whose order is known and
// shows in the json, txt, raw and newline_values_only outputters; any
// other return comes back as it is. Returns travel as CBOR maps, whose
// order the wire does not keep (the encoding sorts keys so that signed
// messages are deterministic), so the CLI, which knows the function and
// its arguments, puts the order back.
//
//   - cmd.run_all: pid, retcode, stdout, stderr (salt/modules/cmdmod.py
//     _run fills ret in that order);
//   - grains.item: the grains in argument order (salt/modules/grains.py
//     item).
func InSaltOrder(fun string, args []any, ret any) any {
	m, ok := ret.(map[string]any)
	if !ok {
		return ret
	}
	switch fun {
	case "cmd.run_all":
		return Ordered{Keys: []string{"pid", "retcode", "stdout", "stderr"}, Values: m}
	case "grains.item":
		keys := make([]string, 0, len(args))
		for _, a := range args {
			keys = append(keys, fmt.Sprint(a))
		}
		return Ordered{Keys: keys, Values: m}
	}
	return ret
}

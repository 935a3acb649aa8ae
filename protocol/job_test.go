package protocol

import (
	"crypto/ed25519"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func testJobBody() *JobBody {
	return &JobBody{
		JID: "20261122120000123456", Tgt: "web*", TgtType: "glob", Fun: "cmd.run",
		Arg:   []any{"uptime", int64(3), true},
		Kwarg: map[string]any{"cwd": "/tmp", "env": map[string]any{"LANG": "C"}, "timeout": int64(30)},
		User:  "root", Timeout: 60, Ret: "syslog", Master: "master1", Delimiter: ":",
	}
}

// testCompoundJobBody is `halite '*' cmd.run,test.ping 'echo hi' cwd=/tmp ,`:
// Salt's load has fun ["cmd.run", "test.ping"] and arg [["echo hi",
// {"cwd": "/tmp", "__kwarg__": true}], []] (SaltCMDOptionParser in
// salt/utils/parsers.py, LocalClient.cmd in salt/client/__init__.py).
func testCompoundJobBody() *JobBody {
	return &JobBody{
		JID: "20261124120000123456", Tgt: "*", TgtType: "glob", Fun: "cmd.run,test.ping",
		Funs:      []string{"cmd.run", "test.ping"},
		FunArgs:   [][]any{{"echo hi"}, {}},
		FunKwargs: []map[string]any{{"cwd": "/tmp"}, nil},
		User:      "root",
	}
}

func TestJobRoundTrip(t *testing.T) {
	pub, priv := newKey(t)
	for _, body := range []*JobBody{
		testJobBody(),
		testCompoundJobBody(),
		{JID: "00000000000000000000", Tgt: "*", TgtType: "glob", Fun: "test.echo,test.echo", Funs: []string{"test.echo", "test.echo"}},
		{JID: "00000000000000000000", Tgt: "*", TgtType: "glob", Fun: "test.ping"},
	} {
		j, err := SignJob(priv, body)
		if err != nil {
			t.Fatalf("SignJob: %v", err)
		}
		b := roundTrip(t, j)
		m, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.(*Job).Open(pub)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if diff := cmp.Diff(body, got); diff != "" {
			t.Errorf("opened body differs (-want +got):\n%s", diff)
		}
	}
}

func TestJobOpenErrors(t *testing.T) {
	pub, priv := newKey(t)
	otherPub, _ := newKey(t)
	sign := func(b *JobBody) *Job {
		t.Helper()
		j, err := SignJob(priv, b)
		if err != nil {
			t.Fatalf("SignJob: %v", err)
		}
		return j
	}
	good := sign(testJobBody())
	noFun := testJobBody()
	noFun.Fun = ""
	compound := func(edit func(*JobBody)) *Job {
		t.Helper()
		b := testCompoundJobBody()
		edit(b)
		return sign(b)
	}
	for _, tc := range []struct {
		name string
		job  *Job
		key  []byte
		want Kind
	}{
		{"tampered body", &Job{Signed: Signed{Body: flipBit(good.Body, len(good.Body)-1), Sig: good.Sig}}, pub, KindBadSig},
		{"tampered sig", &Job{Signed: Signed{Body: good.Body, Sig: flipBit(good.Sig, 0)}}, pub, KindBadSig},
		{"short sig", &Job{Signed: Signed{Body: good.Body, Sig: good.Sig[:63]}}, pub, KindBadSig},
		{"no sig", &Job{Signed: Signed{Body: good.Body}}, pub, KindBadSig},
		{"wrong key", good, otherPub, KindBadSig},
		{"no key", good, nil, KindBadSig},
		{"short jid", sign(&JobBody{JID: "2026112212", Fun: "test.ping"}), pub, KindMalformed},
		{"jid with letters", sign(&JobBody{JID: "2026112212000012345x", Fun: "test.ping"}), pub, KindMalformed},
		{"no function", sign(noFun), pub, KindMalformed},
		{"body not a map", sign(nil), pub, KindMalformed},
		{"compound fun not the join", compound(func(b *JobBody) { b.Fun = "test.ping" }), pub, KindMalformed},
		{"compound fun reordered", compound(func(b *JobBody) { b.Fun = "test.ping,cmd.run" }), pub, KindMalformed},
		{"compound with arg", compound(func(b *JobBody) { b.Arg = []any{"x"} }), pub, KindMalformed},
		{"compound with kwarg", compound(func(b *JobBody) { b.Kwarg = map[string]any{"x": 1} }), pub, KindMalformed},
		{"compound short fun_args", compound(func(b *JobBody) { b.FunArgs = b.FunArgs[:1] }), pub, KindMalformed},
		{"compound long fun_args", compound(func(b *JobBody) { b.FunArgs = append(b.FunArgs, []any{}) }), pub, KindMalformed},
		{"compound short fun_kwargs", compound(func(b *JobBody) { b.FunKwargs = b.FunKwargs[:1] }), pub, KindMalformed},
		{"fun_args without funs", compound(func(b *JobBody) { b.Funs, b.Fun = nil, "cmd.run" }), pub, KindMalformed},
		{"fun_kwargs without funs", compound(func(b *JobBody) { b.Funs, b.FunArgs, b.Fun = nil, nil, "cmd.run" }), pub, KindMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.job.Open(tc.key)
			if err == nil {
				t.Fatalf("Open = %+v, want error", b)
			}
			wantKind(t, err, tc.want)
		})
	}
}

func TestIsJID(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"20261122120000123456", true},
		{"00000000000000000000", true},
		{"2026112212000012345", false},
		{"202611221200001234567", false},
		{"2026112212000012345a", false},
		{"-2026112212000012345", false},
		{"", false},
		{"req", false},
	} {
		if got := IsJID(tc.s); got != tc.want {
			t.Errorf("IsJID(%q): got %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestJobForRelayRoundTrip(t *testing.T) {
	job, err := SignJob(fuzzKey, testJobBody())
	if err != nil {
		t.Fatal(err)
	}
	job.IDs = []string{"cam1", "cam2"}
	roundTrip(t, job)
	// The ids lie outside the signature: the job opens with or without them.
	if _, err := job.Open(fuzzKey.Public().(ed25519.PublicKey)); err != nil {
		t.Errorf("job with ids does not open: %v", err)
	}
}

// TestReturnFunArgs: a return's fun_args are the user's arguments, as
// Salt's minion returns data["arg"] (salt/minion.py _thread_return), never
// the data the master attaches under "__" keys.
func TestReturnFunArgs(t *testing.T) {
	b := &JobBody{Arg: []any{"a"}, Kwarg: map[string]any{"test": true, "__state__": map[string]any{"low": []any{}}, "__for__": []any{"x"}}}
	got := b.ReturnFunArgs()
	if len(got) != 2 || got[0] != "a" {
		t.Fatalf("ReturnFunArgs = %v", got)
	}
	kw, _ := got[1].(map[string]any)
	if len(kw) != 1 || kw["test"] != true {
		t.Errorf("kwargs in fun_args = %v, want only test", kw)
	}
	if got := (&JobBody{Arg: []any{1}, Kwarg: map[string]any{"__for__": []any{"x"}}}).ReturnFunArgs(); len(got) != 1 {
		t.Errorf("only __ kwargs: fun_args = %v, want the positional one", got)
	}
}

package pillar

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

// TestCmdExtPillars: cmd_json and cmd_yaml run the command with %s the
// device id (salt/pillar/cmd_json.py, cmd_yaml.py); a failing command is
// an error in _errors (Salt's ext_pillar() wording), not a silent {}; an
// id with shell syntax is quoted.
func TestCmdExtPillars(t *testing.T) {
	dir := tree(t, map[string]string{"top.sls": "base:\n  '*':\n    - a\n", "a.sls": "a: {from: sls, keep: 1}\n"})
	c := newTest(t, Options{Roots: map[string][]string{"base": {dir}}, ExtPillar: []any{
		map[string]any{"cmd_json": `echo '{"a": {"from": "json"}, "id": "%s", "f": 1.0, "n": 2}'`},
		map[string]any{"cmd_yaml": "printf 'y: yes\\nid2: %s\\n'"},
	}}, nil)
	want := map[string]any{"a": map[string]any{"from": "json", "keep": 1}, "id": "web1", "f": 1.0, "n": 2, "y": true, "id2": "web1"}
	if d := cmp.Diff(want, mustFor(t, c, "web1")); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	c = newTest(t, Options{ExtPillar: []any{
		map[string]any{"cmd_json": "echo not json"},
		map[string]any{"cmd_yaml": "exit 3"},
		map[string]any{"git": "whatever"},
		map[string]any{"cmd_json": `echo {\"id\": \"%s\"}`},
	}}, nil)
	hostile := "a;touch${IFS}pwned$(touch${IFS}pwned)`touch${IFS}pwned`"
	p := mustFor(t, c, hostile)
	if _, err := os.Stat("pwned"); err == nil {
		os.Remove("pwned")
		t.Errorf("the device id ran a command on the master")
	}
	if p["id"] != hostile {
		t.Errorf("id = %v, want the id as it is (quoted for the shell)", p["id"])
	}
	errs, _ := p["_errors"].([]any)
	if len(errs) != 3 || !strings.HasPrefix(errs[0].(string), "Failed to load ext_pillar cmd_json: JSON data from") ||
		!strings.HasPrefix(errs[1].(string), "Failed to load ext_pillar cmd_yaml: command") ||
		errs[2] != "Specified ext_pillar interface git is unavailable" {
		t.Errorf("_errors = %q", errs)
	}
}

// TestFileTree follows Salt's tests/pytests/unit/pillar/test_file_tree.py:
// hosts/<id>/ over nodegroups/<group>/, directories as mappings, the last
// newline dropped unless keep_newline (a bool or globs).
func TestFileTree(t *testing.T) {
	root := tree(t, map[string]string{
		"hosts/test-host/apache/config.d/httpd":      "Listen 80\n",
		"hosts/test-host/apache/config.d/httpd.conf": "# httpd\n",
		"hosts/test-host/mydir/file":                 "host\n",
		"nodegroups/test-group/mydir/file":           "group\n",
		"nodegroups/test-group/shared":               "shared\n",
		"nodegroups/other/x":                         "no\n",
	})
	ng := map[string]any{"test-group": "L@test-host,x", "other": "L@nobody"}
	c := newTest(t, Options{Nodegroups: ng, ExtPillar: []any{map[string]any{"file_tree": map[string]any{
		"root_dir": root, "keep_newline": []any{"apache/config.d/*"},
	}}}}, nil)
	want := map[string]any{
		"apache": map[string]any{"config.d": map[string]any{"httpd": "Listen 80\n", "httpd.conf": "# httpd\n"}},
		"mydir":  map[string]any{"file": "host"},
		"shared": "shared",
	}
	if d := cmp.Diff(want, mustFor(t, c, "test-host")); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	c = newTest(t, Options{ExtPillar: []any{map[string]any{"file_tree": map[string]any{"root_dir": root + "/nope"}}}}, nil)
	errs, _ := mustFor(t, c, "test-host")["_errors"].([]any)
	if len(errs) != 1 || !strings.Contains(errs[0].(string), "does not exist or is not a directory") {
		t.Errorf("_errors = %q", errs)
	}
}

// TestSQLProcessResults: sql_base's folding of rows, cases of Salt's
// tests/pytests/unit/pillar/test_mysql.py (test_12x depth, test_13x
// merges, test_301 with_lists) and test_sql_base.py.
func TestSQLProcessResults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields []string
		depth  int
		q      sqlQuery
		rows   [][]any
		want   map[string]any
	}{
		{"depth 0", []string{"a", "b", "c", "d"}, 0, sqlQuery{}, [][]any{{1, 2, 3, 4}}, map[string]any{"1": map[string]any{"2": map[string]any{"3": 4}}}},
		{"depth 1", []string{"a", "b", "c", "d"}, 1, sqlQuery{}, [][]any{{1, 2, 3, 4}}, map[string]any{"1": map[string]any{"b": 2, "c": 3, "d": 4}}},
		{"depth 2", []string{"a", "b", "c", "d"}, 2, sqlQuery{}, [][]any{{1, 2, 3, 4}}, map[string]any{"1": map[string]any{"2": map[string]any{"c": 3, "d": 4}}}},
		{"depth 4", []string{"a", "b", "c", "d"}, 4, sqlQuery{}, [][]any{{1, 2, 3, 4}}, map[string]any{"1": map[string]any{"2": map[string]any{"3": 4}}}},
		{"merge depth 0", []string{"a", "b", "c", "d"}, 0, sqlQuery{}, [][]any{{1, 2, 3, 4}, {1, 2, 3, 5}, {1, 2, 4, 6}}, map[string]any{"1": map[string]any{"2": map[string]any{"3": 5, "4": 6}}}},
		{"as_list", []string{"a", "b"}, 0, sqlQuery{asList: true}, [][]any{{"a", 1}, {"a", 2}, {"b", 3}}, map[string]any{"a": []any{1, 2}, "b": 3}},
		{"ignore_null", []string{"a", "b"}, 0, sqlQuery{ignoreNull: true}, [][]any{{"a", 1}, {"a", nil}}, map[string]any{"a": 1}},
		{"with_lists 1,3", []string{"a", "b", "c", "d", "e", "v"}, 0, sqlQuery{withLists: []int{1, 3}}, [][]any{
			{"a", "b", "c", "d", "e", 1}, {"a", "b", "c", "f", "g", 2}, {"a", "z", "h", "y", "j", 3}, {"a", "z", "h", "y", "k", 4},
		}, map[string]any{"a": []any{
			map[string]any{"c": []any{map[string]any{"e": 1}, map[string]any{"g": 2}}},
			map[string]any{"h": []any{map[string]any{"j": 3, "k": 4}}},
		}}},
		{"as_json", []string{"j"}, 0, sqlQuery{asJSON: true, asList: true}, [][]any{{`{"a": {"b": [1, 2]}, "c": 3}`}, {`{"a": {"b": [1, 3]}, "d": 4}`}}, map[string]any{"a": map[string]any{"b": []any{1, 2, 3}}, "c": 3, "d": 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSQLResult()
			r.processFields(tc.fields, tc.depth)
			r.enterRoot("")
			r.q = tc.q
			if err := r.processResults(tc.rows); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, plainOdict(r.result)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestExtractQueries: Salt's test_mysql.py test_002_extract_queries_list
// and the keyword form (sorted, under their key).
func TestExtractQueries(t *testing.T) {
	qs, err := extractQueries([]any{"SELECT blah", []any{"SELECT blah4", 2}, map[string]any{"query": "SELECT blah9", "with_lists": "1,2"}, ""},
		map[string]any{"z": "SELECT z", "a": map[string]any{"query": "SELECT a", "as_list": true}})
	if err != nil {
		t.Fatal(err)
	}
	want := []sqlQuery{{query: "SELECT blah"}, {query: "SELECT blah4", depth: 2}, {query: "SELECT blah9", withLists: []int{1, 2}}, {root: "a", query: "SELECT a", asList: true}, {root: "z", query: "SELECT z"}}
	if d := cmp.Diff(want, qs, cmp.AllowUnexported(sqlQuery{})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestPostgres runs the postgres ext_pillar against the PostgreSQL
// server on 127.0.0.1:5432 (trust auth, database test), in a table of
// its own; a server that does not answer fails the test.
func TestPostgres(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/test?connect_timeout=5")
	if err != nil {
		t.Fatalf("PostgreSQL at 127.0.0.1:5432 does not answer (run tools/ci/services.sh): %v", err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	rand.Read(b[:])
	table := "halite_pillar_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (minion_id text, pillar text, k text, value text, n integer)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP TABLE "+table) })
	if _, err := conn.Exec(ctx, "INSERT INTO "+table+` VALUES
		('web1', 'app', 'port', '8080', 1), ('web1', 'app', 'user', 'www', 2), ('web1', 'dns', 'server', '10.0.0.1', 3),
		('web1', 'dns', 'server', '10.0.0.2', 4), ('db1', 'app', 'port', '5432', 5)`); err != nil {
		t.Fatal(err)
	}
	opts := map[string]any{"postgres": map[string]any{"host": "127.0.0.1", "user": "postgres", "pass": "", "db": "test", "port": 5432, "sslmode": "disable"}}
	c := newTest(t, Options{Opts: opts, ExtPillar: []any{map[string]any{"postgres": []any{
		"SELECT pillar, k, value FROM " + table + " WHERE minion_id = %s AND pillar = 'app' ORDER BY n",
		map[string]any{"query": "SELECT pillar, k, value FROM " + table + " WHERE minion_id = %s AND pillar = 'dns' ORDER BY n", "as_list": true},
	}}}}, nil)
	want := map[string]any{"app": map[string]any{"port": "8080", "user": "www"}, "dns": map[string]any{"server": []any{"10.0.0.1", "10.0.0.2"}}}
	if d := cmp.Diff(want, mustFor(t, c, "web1")); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]any{"app": map[string]any{"port": "5432"}}, mustFor(t, c, "db1")); d != "" {
		t.Errorf("db1 (-want +got):\n%s", d)
	}
	// A server that is not there is an error in _errors.
	bad := map[string]any{"postgres": map[string]any{"host": "127.0.0.1", "port": 1, "user": "postgres", "db": "test"}}
	c = newTest(t, Options{Opts: bad, ExtPillar: []any{map[string]any{"postgres": []any{"SELECT 1 AS a, 2 AS b WHERE %s = %s"}}}}, nil)
	errs, _ := mustFor(t, c, "web1")["_errors"].([]any)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].(string), "Failed to load ext_pillar postgres: connect to POSTGRES") {
		t.Errorf("_errors = %q", errs)
	}
}

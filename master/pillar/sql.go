package pillar

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/halite-fleet/halite/state"
)

// Limits of what one SQL ext_pillar may bring into a device's pillar.
const (
	maxSQLRows    = 100000
	maxSQLQueries = 64
	sqlTimeout    = 30 * time.Second
)

// sqlQuery is one normalised query of Salt's SQL ext_pillar
// (salt/pillar/sql_base.py extract_queries): root is the key the results
// go under ("" for the pillar's root).
type sqlQuery struct {
	root       string
	query      string
	depth      int
	asList     bool
	asJSON     bool
	withLists  []int
	ignoreNull bool
}

// extractQueries is sql_base's extract_queries: positional queries
// (strings, [query, depth] lists, {query: ...} mappings) in order, then
// keyword ones sorted by key; empty ones dropped.
func extractQueries(args []any, kwargs map[string]any) ([]sqlQuery, error) {
	type qb struct {
		root string
		v    any
	}
	var buf []qb
	for _, a := range args {
		buf = append(buf, qb{"", a})
	}
	keys := make([]string, 0, len(kwargs))
	for k := range kwargs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		buf = append(buf, qb{k, kwargs[k]})
	}
	var out []sqlQuery
	for _, b := range buf {
		q := sqlQuery{root: b.root}
		switch v := b.v.(type) {
		case string:
			if v == "" {
				continue
			}
			q.query = v
		case []any:
			if len(v) == 0 || !state.Truthy(v[0]) {
				continue
			}
			q.query = fmt.Sprint(v[0])
			if len(v) > 1 {
				d, ok := toInt(v[1])
				if !ok {
					return nil, fmt.Errorf("query %q: depth %v is not an integer", q.query, v[1])
				}
				q.depth = d
			}
		case map[string]any:
			s, _ := v["query"].(string)
			if s == "" {
				continue
			}
			q.query = s
			if d, ok := v["depth"]; ok {
				n, ok := toInt(d)
				if !ok {
					return nil, fmt.Errorf("query %q: depth %v is not an integer", s, d)
				}
				q.depth = n
			}
			q.asList = state.Truthy(v["as_list"])
			q.asJSON = state.Truthy(v["as_json"])
			q.ignoreNull = state.Truthy(v["ignore_null"])
			switch wl := v["with_lists"].(type) {
			case nil:
			case string:
				if wl == "" {
					break
				}
				for _, p := range strings.Split(wl, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(p))
					if err != nil {
						return nil, fmt.Errorf("query %q: with_lists %q: %w", s, wl, err)
					}
					q.withLists = append(q.withLists, n)
				}
			case []any:
				for _, x := range wl {
					n, ok := toInt(x)
					if !ok {
						return nil, fmt.Errorf("query %q: with_lists %v: not integers", s, wl)
					}
					q.withLists = append(q.withLists, n)
				}
			case int:
				q.withLists = []int{wl}
			default:
				return nil, fmt.Errorf("query %q: with_lists %v: want a string like '1,3'", s, wl)
			}
		default:
			continue
		}
		out = append(out, q)
	}
	if len(out) > maxSQLQueries {
		return nil, fmt.Errorf("%d queries, at most %d", len(out), maxSQLQueries)
	}
	return out, nil
}

// odict is a Python dict: keys in insertion order (with_lists turns a
// dict's values into a list in that order).
type odict struct {
	keys []string
	m    map[string]any
}

func newOdict() *odict { return &odict{m: map[string]any{}} }

func (d *odict) has(k string) bool { _, ok := d.m[k]; return ok }

func (d *odict) set(k string, v any) {
	if _, ok := d.m[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.m[k] = v
}

// plain is d as map[string]any, nested odicts too.
func plainOdict(v any) any {
	switch x := v.(type) {
	case *odict:
		out := make(map[string]any, len(x.keys))
		for _, k := range x.keys {
			out[k] = plainOdict(x.m[k])
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainOdict(e)
		}
		return out
	}
	return v
}

// sqlResult is sql_base's SqlBaseExtPillar state: result and focus.
type sqlResult struct {
	result, focus *odict
	fields        []string
	depth         int
	q             sqlQuery
}

func newSQLResult() *sqlResult {
	r := &sqlResult{result: newOdict()}
	r.focus = r.result
	return r
}

func (r *sqlResult) enterRoot(root string) {
	if root != "" {
		r.focus = newOdict()
		r.result.set(root, r.focus)
	} else {
		r.focus = r.result
	}
}

func (r *sqlResult) processFields(fields []string, depth int) {
	r.fields = fields
	n := len(fields)
	if depth == 0 || depth >= n {
		r.depth = n - 1
	} else {
		r.depth = depth
	}
}

// key is a row value as a dict key (Python's str of it).
func key(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	}
	return fmt.Sprint(v)
}

func (r *sqlResult) inLists(n int) bool {
	for _, x := range r.q.withLists {
		if x == n {
			return true
		}
	}
	return false
}

// processResults is sql_base's process_results.
func (r *sqlResult) processResults(rows [][]any) error {
	type lst struct {
		d    *odict
		keys []string
	}
	var order []*odict
	listify := map[*odict]*lst{}
	addList := func(d *odict, k string) {
		l := listify[d]
		if l == nil {
			l = &lst{d: d}
			listify[d] = l
			order = append(order, d)
		}
		for _, x := range l.keys {
			if x == k {
				return
			}
		}
		l.keys = append(l.keys, k)
	}
	nf := len(r.fields)
	if nf < 2 && !(r.q.asJSON && nf == 1) {
		return fmt.Errorf("%d column(s): a query needs a key and a value column (or one JSON column with as_json)", nf)
	}
	for _, ret := range rows {
		if len(ret) != nf {
			return fmt.Errorf("row of %d fields, want %d", len(ret), nf)
		}
		crd := r.focus
		if r.q.asJSON && nf == 1 {
			var m map[string]any
			switch s := ret[0].(type) {
			case string:
				v, err := decodeJSON([]byte(s))
				if err != nil {
					return fmt.Errorf("as_json: %w", err)
				}
				if m, _ = v.(map[string]any); m == nil {
					return fmt.Errorf("as_json: a row holds %T, not a JSON object", v)
				}
			case map[string]any:
				m = s
			default:
				return fmt.Errorf("as_json: a row holds %T, not a JSON object", ret[0])
			}
			cur := plainOdict(r.focus).(map[string]any)
			merged := update(cur, normalize(m), r.q.asList)
			r.focus.keys, r.focus.m = nil, map[string]any{}
			ks := make([]string, 0, len(merged))
			for k := range merged {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			for _, k := range ks {
				r.focus.set(k, merged[k])
			}
			continue
		}
		for i := 0; i < r.depth-1; i++ {
			k := key(ret[i])
			if r.inLists(i + 1) {
				addList(crd, k)
			}
			if !crd.has(k) {
				n := newOdict()
				crd.set(k, n)
				crd = n
				continue
			}
			switch x := crd.m[k].(type) {
			case []any:
				n := newOdict()
				crd.m[k] = append(x, n)
				crd = n
			case *odict:
				crd = x
			default:
				n := newOdict()
				if r.q.asList {
					crd.m[k] = []any{x, n}
				} else {
					crd.m[k] = n
				}
				crd = n
			}
		}
		if r.depth == nf-1 {
			nk := nf - 2
			k := key(ret[nk])
			if (r.q.asList && crd.has(k)) || r.inLists(nk+1) {
				if crd.has(k) {
					if _, ok := crd.m[k].([]any); !ok {
						crd.m[k] = []any{crd.m[k]}
					}
				} else {
					crd.set(k, []any{})
				}
				crd.m[k] = append(crd.m[k].([]any), ret[nf-1])
			} else if !r.q.ignoreNull || ret[nf-1] != nil {
				crd.set(k, ret[nf-1])
			}
			continue
		}
		k := key(ret[r.depth-1])
		if !crd.has(k) {
			crd.set(k, newOdict())
		}
		if r.inLists(r.depth) {
			addList(crd, k)
		}
		next, ok := crd.m[k].(*odict)
		if !ok {
			next = newOdict()
			crd.m[k] = next
		}
		crd = next
		for i := r.depth; i < nf; i++ {
			nk := r.fields[i]
			if r.inLists(i + 1) {
				addList(crd, nk)
			}
			if r.q.asList && crd.has(nk) {
				if l, ok := crd.m[nk].([]any); ok {
					crd.m[nk] = append(l, ret[i])
				} else {
					crd.m[nk] = []any{crd.m[nk], ret[i]}
				}
			} else if !r.q.ignoreNull || ret[i] != nil {
				crd.set(nk, ret[i])
			}
		}
	}
	for i := len(order) - 1; i >= 0; i-- {
		d := order[i]
		for _, k := range listify[d].keys {
			switch x := d.m[k].(type) {
			case *odict:
				vals := make([]any, len(x.keys))
				for j, kk := range x.keys {
					vals[j] = x.m[kk]
				}
				d.m[k] = vals
			case []any:
				d.m[k] = []any{x}
			}
		}
	}
	return nil
}

// pgOptions are Salt's postgres ext_pillar connection options, from the
// master's "postgres" mapping (salt/pillar/postgres.py _get_options).
func pgConnString(opts map[string]any) string {
	o := map[string]any{"host": "localhost", "user": "salt", "pass": "salt", "db": "salt", "port": 5432}
	if m, ok := opts["postgres"].(map[string]any); ok {
		for k := range o {
			if v, ok := m[k]; ok {
				o[k] = v
			}
		}
		if v, ok := m["sslmode"]; ok {
			o["sslmode"] = v
		}
	}
	q := func(v any) string {
		s := fmt.Sprint(v)
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
	}
	s := fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s connect_timeout=10", q(o["host"]), q(o["port"]), q(o["user"]), q(o["pass"]), q(o["db"]))
	if v, ok := o["sslmode"]; ok {
		s += " sslmode=" + q(v)
	}
	return s
}

// pgQuery turns a DB-API query with %s placeholders (psycopg2's, which
// Salt passes the minion id to) into PostgreSQL's $1; %% is a percent sign.
func pgQuery(q string) string {
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		if q[i] == '%' && i+1 < len(q) {
			switch q[i+1] {
			case 's':
				b.WriteString("$1")
				i++
				continue
			case '%':
				b.WriteByte('%')
				i++
				continue
			}
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// extPostgres is Salt's postgres ext_pillar: each query run with the
// device's id as %s, its rows folded into nested mappings as sql_base
// does.
func extPostgres(ctx context.Context, opts map[string]any, id string, args []any, kwargs map[string]any) (map[string]any, error) {
	qs, err := extractQueries(args, kwargs)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, sqlTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgConnString(opts))
	if err != nil {
		return nil, fmt.Errorf("connect to POSTGRES: %w", err)
	}
	defer conn.Close(context.Background())
	r := newSQLResult()
	for _, q := range qs {
		sql := pgQuery(q.query)
		var qargs []any
		if strings.Contains(sql, "$1") {
			qargs = []any{id}
		}
		rows, err := conn.Query(ctx, sql, qargs...)
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", q.query, err)
		}
		var fields []string
		for _, f := range rows.FieldDescriptions() {
			fields = append(fields, f.Name)
		}
		var all [][]any
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("query %q: %w", q.query, err)
			}
			for i, v := range vals {
				vals[i] = sqlValue(v)
			}
			all = append(all, vals)
			if len(all) > maxSQLRows {
				rows.Close()
				return nil, fmt.Errorf("query %q: more than %d rows", q.query, maxSQLRows)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("query %q: %w", q.query, err)
		}
		if len(fields) == 0 {
			continue
		}
		r.processFields(fields, q.depth)
		r.enterRoot(q.root)
		r.q = q
		if err := r.processResults(all); err != nil {
			return nil, fmt.Errorf("query %q: %w", q.query, err)
		}
	}
	return plainOdict(r.result).(map[string]any), nil
}

// sqlValue is a column's value as pillar data: numbers, strings, bools,
// nil; times as RFC 3339; anything else as its text.
func sqlValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, float64:
		return v
	case int64:
		return int(x)
	case int32:
		return int(x)
	case int16:
		return int(x)
	case float32:
		return float64(x)
	case []byte:
		return string(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case map[string]any:
		return normalize(x)
	}
	return fmt.Sprint(v)
}

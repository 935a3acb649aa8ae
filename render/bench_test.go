package render

import (
	"fmt"
	"testing"
)

// BenchmarkSLS renders the reactor file of reactor's
// BenchmarkRenderDispatch (Salt's haproxy example with |json) from the
// template cache: the render cost of one reaction.
func BenchmarkSLS(b *testing.B) {
	src := []byte(`{% if data['act'] == 'accept' and data['id'].startswith('web') %}
add_new_minion_to_pool:
  local.state.apply:
    - tgt: 'haproxy*'
    - args:
      - mods: haproxy.refresh_pool
      - pillar:
          new_minion: {{ data['id'] }}
          event: {{ data|json }}
{% endif %}
`)
	r := New(Options{})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, e, err := r.SLS("/nonexistent/r.sls", src, "salt/key", map[string]any{"id": fmt.Sprintf("web%d", i%100), "act": "accept"})
		if err != nil || len(e) != 1 {
			b.Fatalf("got %v, %v", e, err)
		}
	}
}

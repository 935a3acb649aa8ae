package localcache

import (
	"path/filepath"
	"testing"

	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/returners/rettest"
)

func TestJobCache(t *testing.T) {
	c, err := jobcache.Open(filepath.Join(t.TempDir(), "jobs.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := returners.Open(rettest.Ctx(t), "local_cache", returners.RoleJobCache, returners.Config{Embedded: c})
	if err != nil {
		t.Fatal(err)
	}
	rettest.JobCache(t, r.(returners.JobCache), nil)
	if _, err := returners.Open(rettest.Ctx(t), "local_cache", returners.RoleJobCache, returners.Config{}); err == nil {
		t.Fatal("local_cache without the master's cache: got no error")
	}
}

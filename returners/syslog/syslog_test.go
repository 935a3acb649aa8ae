package syslog

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/returners/rettest"
)

func TestUDP(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	r, err := returners.Open(rettest.Ctx(t), "syslog", returners.RoleReturn, returners.Config{Opts: map[string]any{
		"syslog.network": "udp", "syslog.address": pc.LocalAddr().String(), "syslog.facility": "LOG_LOCAL3", "syslog.tag": "halite"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Returner(rettest.Ctx(t), rettest.Ret("20260101000000000000", "web1", "test.ping", true)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	// <PRI>: local3 (19) * 8 + info (6) = 158.
	msg := string(buf[:n])
	if !strings.HasPrefix(msg, "<158>") || !strings.Contains(msg, "halite") || !strings.Contains(msg, `"id":"web1"`) {
		t.Fatalf("syslog message %q: want <158>, tag halite and the return as JSON", msg)
	}
	if _, err := returners.Open(rettest.Ctx(t), "syslog", returners.RoleReturn, returners.Config{Opts: map[string]any{"syslog.level": "LOUD"}}); err == nil {
		t.Fatal("syslog.level LOUD: got no error")
	}
}

// Package gotrim makes the `go build -overlay` file that builds the Halite
// agent for 32-bit ARM and MIPS with a trimmed standard library: the files
// of third_party/gotrim/<go version>/ in place of, or instead of, their
// originals in GOROOT (third_party/gotrim/HALITE.md says what differs and
// why). Every place that builds the device agent uses it — the Makefile's
// cross target through tools/gotrim, firmware's builder, TestAgentSize and
// the e2e qemu tests — and it refuses, rather than builds something else,
// when the Go toolchain is not the one the trims were made for or a
// replaced original differs from the one they were made from.
package gotrim

// Package tools is the home of Halite's fleet simulator (tools/fleet,
// tools/fleetsim), the multimaster failover benchmark (tools/failoverbench),
// benchmark harness (bench.sh), demo (demo.sh) and the writer of the device
// agent's standard-library overlay (tools/gotrim, which `make cross` runs).
// Tools may import anything; nothing imports them.
package tools

// Package tools is the home of Halite's fleet simulator (tools/fleet,
// tools/fleetsim), the multimaster failover benchmark (tools/failoverbench),
// benchmark harness (bench.sh) and demo (demo.sh). Tools
// may import anything; nothing imports them.
package tools

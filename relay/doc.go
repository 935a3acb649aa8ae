// Package relay will be the client-site relay: a halite-agent with a
// relay: section that proxies thousands of devices on a network nobody
// controls to the master, over one upstream QUIC connection, fanning jobs
// out with the targets package and batching returns back. It forwards the
// master's signed jobs and the devices' authenticated returns unchanged, so
// it can delay or drop but never forge. Not built yet: see the relay issue.
package relay

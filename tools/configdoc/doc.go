// Command configdoc writes docs/CONFIG.md, the reference of every option of
// the master, the agent and the agent's relay: section, from their option
// tables in package config (name, type, default, status, meaning):
//
//	go run ./tools/configdoc > docs/CONFIG.md
//
// TestConfigDocUpToDate fails when docs/CONFIG.md differs from its output.
package main

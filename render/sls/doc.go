// Package sls reads rendered SLS text (YAML) into ordered top-level
// entries, the way Salt's state compiler sees them. It has no template
// engine, so the default agent build can read plain-YAML reactor files
// with it; package render adds Jinja in front of it, and gives interpolated
// values back through Values. Aliases are bounded by internal/yamlbound.
package sls

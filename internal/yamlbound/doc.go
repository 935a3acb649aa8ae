// Package yamlbound bounds what YAML aliases may add to a document. A
// parsed yaml.Node keeps each alias as one node, but every reader of the
// project (SLS and reactor files in render/sls, the configuration loader,
// CLI arguments) expands them into plain values, so a few hundred bytes of
// nested aliases ("billion laughs") would grow into gigabytes. Check
// measures the expanded size of a parsed document in one linear pass and
// refuses it, naming the line of the alias, when aliases add more than
// MaxAliasWeight (nodes, and scalar text by 32 bytes) beyond what the
// document holds itself.
//
// It imports only go.yaml.in/yaml/v3, so both the device agent (its
// configuration) and the master use it.
package yamlbound

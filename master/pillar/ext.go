package pillar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/halite-fleet/halite/render/sls"
	"github.com/halite-fleet/halite/state"
)

// Limits of the external pillars.
const (
	// cmdTimeout bounds one cmd_json or cmd_yaml command.
	cmdTimeout = 60 * time.Second
	// maxCmdOutput is the most a command's output may be.
	maxCmdOutput = 16 << 20
	// maxTreeFiles and maxTreeBytes bound what file_tree reads for a device.
	maxTreeFiles = 10000
	maxTreeBytes = 64 << 20
)

// ExtNames are the ext_pillar interfaces Halite has.
var ExtNames = []string{"cmd_json", "cmd_yaml", "file_tree", "postgres"}

// errUnavailable is an ext_pillar name Halite has no interface for.
var errUnavailable = errors.New("unavailable")

// extCall runs one ext_pillar interface for device id, with val as Salt
// passes it: a mapping as keyword arguments, a list as positional ones,
// anything else as the one argument (salt/pillar/__init__.py
// _external_pillar_data).
func (c *Compiler) extCall(ctx context.Context, name string, val any, id string) (map[string]any, error) {
	var args []any
	var kwargs map[string]any
	switch v := val.(type) {
	case map[string]any:
		kwargs = v
	case []any:
		args = v
	default:
		args = []any{v}
	}
	switch name {
	case "cmd_json", "cmd_yaml":
		cmd, err := oneString(name, "command", args, kwargs)
		if err != nil {
			return nil, err
		}
		return runCmd(ctx, name, cmd, id)
	case "file_tree":
		return c.fileTree(ctx, id, args, kwargs)
	case "postgres":
		return extPostgres(ctx, c.opts, id, args, kwargs)
	}
	return nil, errUnavailable
}

func oneString(name, arg string, args []any, kwargs map[string]any) (string, error) {
	if v, ok := kwargs[arg]; ok {
		args = append([]any{v}, args...)
	}
	if len(args) != 1 {
		return "", fmt.Errorf("%s takes one %s, got %d arguments", name, arg, len(args))
	}
	s, ok := args[0].(string)
	if !ok || s == "" {
		return "", fmt.Errorf("%s: %s must be a string, got %v", name, arg, args[0])
	}
	return s, nil
}

// shellID is the device id as the command line gets it in place of %s:
// as it is when it holds only characters a shell takes literally (as
// Salt puts it), else single-quoted, so that a device whose id holds
// shell syntax cannot run commands on the master.
func shellID(id string) string {
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("._-@:+=,%/", r):
		default:
			return "'" + strings.ReplaceAll(id, "'", `'\''`) + "'"
		}
	}
	return id
}

// runCmd is cmd_json and cmd_yaml (salt/pillar/cmd_json.py, cmd_yaml.py):
// the command, each %s replaced by the device id, run by the shell; its
// standard output read as JSON or YAML. Unlike Salt, which logs a failure
// and gives {}, a command that fails or prints no mapping is an error
// (it goes to the device's _errors).
func runCmd(ctx context.Context, name, command, id string) (map[string]any, error) {
	line := strings.ReplaceAll(command, "%s", shellID(id))
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	var out, errb limitedBuffer
	out.max, errb.max = maxCmdOutput, 4096
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if ctx.Err() != nil {
			return nil, fmt.Errorf("command %q: timed out after %s", line, cmdTimeout)
		}
		if msg != "" {
			return nil, fmt.Errorf("command %q: %w: %s", line, err, msg)
		}
		return nil, fmt.Errorf("command %q: %w", line, err)
	}
	if out.over {
		return nil, fmt.Errorf("command %q: output larger than %d bytes", line, maxCmdOutput)
	}
	var v any
	if name == "cmd_json" {
		var err error
		if v, err = decodeJSON(out.Bytes()); err != nil {
			return nil, fmt.Errorf("JSON data from %s failed to parse: %w", line, err)
		}
	} else {
		entries, err := sls.ParseYAML(name, out.String())
		if err != nil {
			return nil, fmt.Errorf("YAML data from '%s' failed to parse: %w", line, err)
		}
		v = entriesMap(entries)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("command %q printed %T, not a mapping", line, v)
	}
	return m, nil
}

// limitedBuffer keeps at most max bytes.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// entriesMap is a rendered document's top-level entries as a mapping.
func entriesMap(entries []sls.Entry) map[string]any {
	m := make(map[string]any, len(entries))
	for _, e := range entries {
		m[e.ID] = e.Value
	}
	return m
}

// fileTree is Salt's file_tree ext_pillar (salt/pillar/file_tree.py):
// under root_dir, nodegroups/<group>/ for each master nodegroup the
// device is in, then hosts/<id>/, each directory a mapping and each file
// a key whose value is the file's contents (its last newline dropped
// unless keep_newline). A relative root_dir is under each pillar_roots
// directory of pillarenv. template is not supported (an error).
func (c *Compiler) fileTree(ctx context.Context, id string, args []any, kw map[string]any) (map[string]any, error) {
	if len(args) > 0 {
		if kw == nil {
			kw = map[string]any{}
		}
		kw["root_dir"] = args[0]
	}
	root, _ := kw["root_dir"].(string)
	if root == "" {
		return nil, fmt.Errorf("file_tree: no root_dir specified")
	}
	if state.Truthy(kw["template"]) {
		return nil, fmt.Errorf("file_tree: template: True is not supported by Halite")
	}
	keep := kw["keep_newline"]
	switch keep.(type) {
	case nil, bool, []any:
	default:
		return nil, fmt.Errorf("file_tree: keep_newline must be either True/False or a list of file globs")
	}
	follow := state.Truthy(kw["follow_dir_links"])
	var dirs []string
	if filepath.IsAbs(root) {
		dirs = []string{root}
	} else {
		if c.pillarenv == "" {
			return nil, fmt.Errorf("file_tree: root_dir is relative but pillarenv is not set")
		}
		roots, ok := c.roots[c.pillarenv]
		if !ok {
			return nil, fmt.Errorf("file_tree: root_dir is relative but no pillar_roots are specified for pillarenv %s", c.pillarenv)
		}
		for _, r := range roots {
			d := filepath.Join(r, root)
			if len(dirs) == 0 || dirs[len(dirs)-1] != d {
				dirs = append(dirs, d)
			}
		}
	}
	budget := &treeBudget{files: maxTreeFiles, bytes: maxTreeBytes}
	result := map[string]any{}
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("file_tree: root_dir %s does not exist or is not a directory", d)
		}
		groups := map[string]any{}
		ngDir := filepath.Join(d, "nodegroups")
		if ents, err := os.ReadDir(ngDir); err == nil && len(c.nodegroups) > 0 {
			names := make([]string, 0, len(ents))
			for _, e := range ents {
				names = append(names, e.Name())
			}
			sort.Strings(names)
			for _, ng := range names {
				if _, ok := c.nodegroups[ng]; !ok {
					continue
				}
				in, err := c.inNodegroup(id, ng)
				if err != nil {
					return nil, fmt.Errorf("file_tree: nodegroup %s: %w", ng, err)
				}
				if !in {
					continue
				}
				p, err := construct(filepath.Join(ngDir, ng), keep, follow, budget)
				if err != nil {
					return nil, err
				}
				groups = update(groups, p, false)
			}
		}
		host := map[string]any{}
		hostDir := filepath.Join(d, "hosts", id)
		if fi, err := os.Stat(hostDir); err == nil {
			if !fi.IsDir() {
				return nil, fmt.Errorf("file_tree: %s exists, but is not a directory", hostDir)
			}
			if host, err = construct(hostDir, keep, follow, budget); err != nil {
				return nil, err
			}
		}
		result = update(result, update(groups, host, false), false)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return result, nil
}

type treeBudget struct{ files, bytes int }

// construct is file_tree's _construct_pillar for one directory.
func construct(top string, keep any, follow bool, b *treeBudget) (map[string]any, error) {
	out := map[string]any{}
	var walk func(dir, prefix string, node map[string]any, depth int) error
	walk = func(dir, prefix string, node map[string]any, depth int) error {
		if depth > maxDepth {
			return fmt.Errorf("file_tree: %s: nested deeper than %d", dir, maxDepth)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("file_tree: %w", err)
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			rel := path.Join(prefix, e.Name())
			typ := e.Type()
			if typ&fs.ModeSymlink != 0 {
				fi, err := os.Stat(p)
				if err != nil {
					continue
				}
				if fi.IsDir() && !follow {
					continue
				}
				typ = fi.Mode().Type()
			}
			if typ.IsDir() {
				sub := map[string]any{}
				node[e.Name()] = sub
				if err := walk(p, rel, sub, depth+1); err != nil {
					return err
				}
				continue
			}
			if !typ.IsRegular() {
				continue // Salt logs "not a regular file"
			}
			if b.files--; b.files < 0 {
				return fmt.Errorf("file_tree: more than %d files", maxTreeFiles)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("file_tree: error reading %s: %w", p, err)
			}
			if b.bytes -= len(data); b.bytes < 0 {
				return fmt.Errorf("file_tree: more than %d bytes", maxTreeBytes)
			}
			if bytes.HasSuffix(data, []byte("\n")) && dropNewline(prefix, e.Name(), keep) {
				data = data[:len(data)-1]
			}
			node[e.Name()] = string(data)
		}
		return nil
	}
	return out, walk(top, "", out, 0)
}

// dropNewline is file_tree's _check_newline.
func dropNewline(prefix, name string, keep any) bool {
	switch k := keep.(type) {
	case nil:
		return true
	case bool:
		return !k
	case []any:
		full := path.Join(prefix, name)
		for _, pat := range k {
			if fnmatch(fmt.Sprint(pat), full) {
				return false
			}
		}
	}
	return true
}

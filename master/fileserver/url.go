package fileserver

import "strings"

// Scheme is the prefix of a URL on the file server.
const Scheme = "salt://"

// ParseURL splits a salt:// URL into its path and the saltenv of its
// "?saltenv=" query, as salt.utils.url.parse: the split is a plain string
// split, not a URL parse (a path may hold '?', '&', '%' and spaces, and
// nothing is percent-decoded); "?env=" is cut off and ignored (Salt no
// longer supports it). An empty saltenv means none was given. A string
// that is not a salt:// URL comes back whole as the path, with no saltenv.
func ParseURL(u string) (path, saltenv string) {
	if !strings.HasPrefix(u, Scheme) {
		return u, ""
	}
	res := u[len(Scheme):]
	if p, _, ok := strings.Cut(res, "?env="); ok {
		return p, ""
	}
	if p, env, ok := strings.Cut(res, "?saltenv="); ok {
		return p, env
	}
	return res, ""
}

// CreateURL joins a path and a saltenv into a salt:// URL, as
// salt.utils.url.create: backslashes become slashes, one leading slash is
// dropped (what urlunparse of a file: URL does), and "?saltenv=" is added
// when saltenv is not empty.
func CreateURL(path, saltenv string) string {
	path = strings.ReplaceAll(path, `\`, "/")
	path = strings.TrimPrefix(path, "/")
	if saltenv != "" {
		return Scheme + path + "?saltenv=" + saltenv
	}
	return Scheme + path
}

// splitLoad is what Salt's master does with the path a client asks for
// (salt/fileserver/__init__.py Fileserver.find_file): a path escaped with a
// leading '|' is taken literally, without the '|'; otherwise a '?' starts a
// query of k=v pairs joined by '&', whose saltenv replaces env.
func splitLoad(p, env string) (string, string) {
	if strings.HasPrefix(p, "|") {
		return strings.TrimLeft(p, "|"), env
	}
	parts := strings.Split(p, "?")
	if len(parts) == 1 {
		return p, env
	}
	for _, kv := range strings.Split(parts[1], "&") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == "saltenv" {
			env = v
		}
	}
	return parts[0], env
}

// resolveURL is the relative path and saltenv a salt:// URL names: the
// client's parse, then the master's, with env the saltenv when the URL
// gives none. ok is false for a URL that is not salt://.
func resolveURL(u, env string) (rel, saltenv string, ok bool) {
	if !strings.HasPrefix(u, Scheme) {
		return "", "", false
	}
	p, senv := ParseURL(u)
	if senv != "" {
		env = senv
	}
	rel, env = splitLoad(p, env)
	return rel, env, true
}

// ResolveRelative is a template's relative name (with "./" and "../")
// joined to the folder of fromRel, the file that names it, both slash
// paths under the roots; ok is false when the name climbs above them.
func ResolveRelative(fromRel, rel string) (string, bool) {
	var parts []string
	if i := strings.LastIndexByte(fromRel, '/'); i >= 0 && fromRel[:i] != "" {
		parts = strings.Split(fromRel[:i], "/")
	}
	for _, p := range strings.Split(rel, "/") {
		switch p {
		case ".", "":
		case "..":
			if len(parts) == 0 {
				return "", false
			}
			parts = parts[:len(parts)-1]
		default:
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "/"), true
}

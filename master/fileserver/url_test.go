package fileserver

import "testing"

// TestParseURL pins salt.utils.url.parse (tests/unit/utils/test_url.py:
// test_parse_path, test_parse_salt_url, test_parse_salt_saltenv): a plain
// split on "?saltenv=", nothing decoded, "?env=" dropped.
func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url, path, env string
	}{
		// test_parse_path: not a salt:// URL, returned whole.
		{"interesting?/path&.conf:and other things", "interesting?/path&.conf:and other things", ""},
		// test_parse_salt_url
		{"salt://?funny/path with {interesting|chars}", "?funny/path with {interesting|chars}", ""},
		// test_parse_salt_saltenv
		{"salt://?funny/path&with {interesting|chars}?saltenv=ambience", "?funny/path&with {interesting|chars}", "ambience"},
		{"salt://a/b.conf", "a/b.conf", ""},
		{"salt://a/b.conf?saltenv=dev", "a/b.conf", "dev"},
		// "env" is not supported; Use "saltenv" (salt/utils/url.py).
		{"salt://a/b.conf?env=dev", "a/b.conf", ""},
		{"salt://%2e%2e/secret", "%2e%2e/secret", ""}, // not percent-decoded
		{"salt://|dir/file.conf?saltenv=basic", "|dir/file.conf", "basic"},
		{"https://example.com/x?saltenv=dev", "https://example.com/x?saltenv=dev", ""},
	} {
		p, env := ParseURL(tc.url)
		if p != tc.path || env != tc.env {
			t.Errorf("ParseURL(%q) = %q, %q; want %q, %q", tc.url, p, env, tc.path, tc.env)
		}
	}
}

// TestCreateURL pins salt.utils.url.create (test_url.py: test_create_url,
// test_create_url_saltenv, test_create_url_with_backslash_in_path,
// test_create_url_saltenv_with_backslash_in_path).
func TestCreateURL(t *testing.T) {
	for _, tc := range []struct {
		path, env, want string
	}{
		{"? interesting/&path.filetype", "", "salt://? interesting/&path.filetype"},
		{"? interesting/&path.filetype", "raumklang", "salt://? interesting/&path.filetype?saltenv=raumklang"},
		{`? interesting\&path.filetype`, "", "salt://? interesting/&path.filetype"},
		{`? interesting\&path.filetype`, "raumklang", "salt://? interesting/&path.filetype?saltenv=raumklang"},
		{"/web/conf", "base", "salt://web/conf?saltenv=base"}, // urlunparse drops one leading '/'
		{"", "base", "salt://?saltenv=base"},
	} {
		if got := CreateURL(tc.path, tc.env); got != tc.want {
			t.Errorf("CreateURL(%q, %q) = %q, want %q", tc.path, tc.env, got, tc.want)
		}
	}
}

// TestResolveURL pins the master's side of a fetch
// (salt/fileserver/__init__.py Fileserver.find_file): '|' escapes the
// query; otherwise a '?' starts k=v&k=v whose saltenv wins.
func TestResolveURL(t *testing.T) {
	for _, tc := range []struct {
		url, env, rel, renv string
	}{
		{"salt://a/b", "base", "a/b", "base"},
		{"salt://a/b?saltenv=dev", "base", "a/b", "dev"},
		{"salt://a/b?foo=1&saltenv=prod", "base", "a/b", "prod"},
		{"salt://a/b?junk", "base", "a/b", "base"},
		{"salt://|a/b?c", "base", "a/b?c", "base"},
		{"salt://|a/b?c?saltenv=dev", "base", "a/b?c", "dev"},
		{"salt://||a", "base", "a", "base"},
	} {
		rel, env, ok := resolveURL(tc.url, tc.env)
		if !ok || rel != tc.rel || env != tc.renv {
			t.Errorf("resolveURL(%q, %q) = %q, %q, %v; want %q, %q", tc.url, tc.env, rel, env, ok, tc.rel, tc.renv)
		}
	}
	if _, _, ok := resolveURL("http://x/a", "base"); ok {
		t.Errorf("resolveURL(http://x/a) ok, want not a salt:// URL")
	}
}

// TestResolveRelative: Salt's relative template names (salt/utils/jinja.py
// SaltCacheLoader, "./" and "../" from the including file's folder).
func TestResolveRelative(t *testing.T) {
	for _, tc := range []struct {
		from, rel, want string
		ok              bool
	}{
		{"web/init.sls", "./map.jinja", "web/map.jinja", true},
		{"web/init.sls", "../common/map.jinja", "common/map.jinja", true},
		{"top.sls", "./a/b.jinja", "a/b.jinja", true},
		{"top.sls", "../escape.jinja", "", false},
		{"web/init.sls", "../../etc/passwd", "", false},
	} {
		got, ok := ResolveRelative(tc.from, tc.rel)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ResolveRelative(%q, %q) = %q, %v; want %q, %v", tc.from, tc.rel, got, ok, tc.want, tc.ok)
		}
	}
}

// Package fileserver is the master's salt:// file server over file_roots:
// Salt's "roots" backend (salt/fileserver/roots.py) with its URL rules
// (salt/utils/url.py) and the parts of its file client (salt/fileclient.py)
// the master needs to compile states.
//
// A Server maps each saltenv to its directories; the first directory
// holding a path serves it, as Salt's roots.find_file. An environment that
// is not configured falls back to the "__env__" roots (with "__env__" in
// their paths replaced by the saltenv), never to base, as in Salt. Paths are
// relative to a root and never leave it: absolute paths, ".." components,
// NUL bytes and symlinks that lead out of the root are refused (the file is
// read through an os.Root of its root directory, so a symlink swapped in
// between the check and the read cannot lead out either). Paths may be
// built from a device's grains by a template, so they are hostile input.
//
// The master's state compiler uses it three ways: SLSPath finds an SLS file
// by its dotted name, Read and Open give a file's bytes and SHA-256 (cached
// by path, size, mtime and inode, so ten thousand devices do not hash one
// file ten thousand times; a lookup is trusted for LookupTTL, one second,
// before the disk is looked at again), and Inline puts the salt:// files a compiled
// state needs into its chunks ("__files__"), so the agent fetches nothing.
// Issue 18's content-addressed transfer replaces the inlined bytes for large
// files; Open's SHA-256 is the name a chunk would then carry.
//
// A Server is safe for concurrent use; the master shares one. It imports
// nothing of Halite's but package state (the chunk type), so a masterless
// agent could use it as well.
package fileserver

package protocol

import "crypto/ed25519"

// The file server's questions (capability CapFileQuery): an agent's cp.*
// functions (cp.get_file, cp.get_dir, cp.list_master, cp.hash_file,
// cp.get_template, ...) ask the master about salt:// files on the agent's
// own session, through any relay, unchanged:
//
//	device                       relay                      master
//	  | FileQuery{Req, Op, Path, Nonce} ----------------------> |
//	  | <------------ FileAnswer{Req, Signed{FileAnswerBody}}    |
//	  | BlobGet{Hash} (each chunk of each manifest; the relay's cache)
//
// The master signs its answer (domain "halite file v1") over the asking
// device's id, the request's nonce, op, path and saltenv, and what it
// found: files by manifest, listings, or the master's own error ("not
// found", "refused"). A relay can therefore neither answer a request with
// an older answer, nor give one device's answer to another, nor change a
// manifest; the chunks the device then fetches are checked against the
// manifest. FileAnswer.Err, outside the signature, is for a relay that
// cannot reach the master: it can withhold an answer, never alter one.
// A rendered template (op "template") may hold the device's pillar: it is
// sealed to the device (SealTo, purpose "file", the nonce as additional
// data) inside the signed body.

// Operations of a FileQuery.
const (
	// FileFind: the file Path (a salt:// URL or a path) names, by manifest.
	FileFind = "find"
	// FileHash: the SHA-256 of the file Path names; no manifest.
	FileHash = "hash"
	// FileList: the files of Saltenv whose path starts with Path (a prefix).
	FileList = "list"
	// FileDirs: the directories of Saltenv whose path starts with Path.
	FileDirs = "dirs"
	// FileDir: every file under the directory Path names, by manifest, and
	// its empty directories.
	FileDir = "dir"
	// FileTemplate: the file Path names rendered (Jinja) for the asking
	// device with its grains and pillar, and Context; sealed to it.
	FileTemplate = "template"
)

// Bounds of the file server's messages.
const (
	MaxFilePath    = 8192     // a FileQuery's Path, a listed path
	MaxFileEnv     = 256      // a saltenv
	MinFileNonce   = 16       // a FileQuery's nonce
	MaxFileNonce   = 64       //
	MaxFileEntries = 50_000   // files, or directories, in one answer
	MaxFileErr     = 4096     // an error text
	MaxFileContext = 64 << 10 // a template's Context, encoded
	// MaxTemplate bounds a rendered template, before sealing: it travels in
	// the answer itself (a larger file goes by manifest: cp.get_file).
	MaxTemplate = 1 << 20
)

// PurposeFile is the sealing purpose of a rendered template.
const PurposeFile = "file"

const domainFile = "halite file v1\x00"

// FileQuery asks the master about the file server, agent to master. It
// names no device: the master answers for the session's own id.
type FileQuery struct {
	Req     uint64 `cbor:"1,keyasint"`
	Op      string `cbor:"2,keyasint"`
	Path    string `cbor:"3,keyasint,omitempty"`
	Saltenv string `cbor:"4,keyasint,omitempty"`
	Nonce   []byte `cbor:"5,keyasint"`
	// Context is a template's extra variables (op "template": cp.get_template's
	// keyword arguments); data, never parsed as a template.
	Context map[string]any `cbor:"6,keyasint,omitempty"`
}

func (*FileQuery) Type() Type { return TypeFileQuery }

// ValidFileOp reports whether op is one of the FileQuery operations.
func ValidFileOp(op string) bool {
	switch op {
	case FileFind, FileHash, FileList, FileDirs, FileDir, FileTemplate:
		return true
	}
	return false
}

func (q *FileQuery) validate() error {
	switch {
	case !ValidFileOp(q.Op):
		return Errorf(KindMalformed, "file_query op %.32q unknown", q.Op)
	case len(q.Path) > MaxFilePath:
		return Errorf(KindTooLarge, "file_query path of %d bytes, limit %d", len(q.Path), MaxFilePath)
	case len(q.Saltenv) > MaxFileEnv:
		return Errorf(KindTooLarge, "file_query saltenv of %d bytes, limit %d", len(q.Saltenv), MaxFileEnv)
	case len(q.Nonce) < MinFileNonce || len(q.Nonce) > MaxFileNonce:
		return Errorf(KindMalformed, "file_query nonce of %d bytes, want %d to %d", len(q.Nonce), MinFileNonce, MaxFileNonce)
	case q.Context != nil && q.Op != FileTemplate:
		return Errorf(KindMalformed, "file_query context for op %s", q.Op)
	}
	if q.Context != nil {
		b, err := Marshal(q.Context)
		if err != nil {
			return Errorf(KindMalformed, "file_query context: %v", err)
		}
		if len(b) > MaxFileContext {
			return Errorf(KindTooLarge, "file_query context of %d bytes, limit %d", len(b), MaxFileContext)
		}
	}
	return nil
}

// FileAnswer answers a FileQuery, master to agent: Signed is a
// FileAnswerBody signed by the master (SignFileAnswer), or Err says why
// there is none (a relay that cannot reach the master, a master that is
// busy). Err is not signed.
type FileAnswer struct {
	Req    uint64 `cbor:"1,keyasint"`
	Signed Signed `cbor:"2,keyasint,omitempty"`
	Err    string `cbor:"3,keyasint,omitempty"`
}

func (*FileAnswer) Type() Type { return TypeFileAnswer }

func (a *FileAnswer) validate() error {
	switch {
	case len(a.Err) > MaxFileErr:
		return Errorf(KindTooLarge, "file_answer error of %d bytes, limit %d", len(a.Err), MaxFileErr)
	case a.Err == "" && (len(a.Signed.Body) == 0 || len(a.Signed.Sig) == 0):
		return Errorf(KindMalformed, "file_answer has neither a signed answer nor an error")
	case a.Err != "" && len(a.Signed.Body) > 0:
		return Errorf(KindMalformed, "file_answer with both an answer and an error")
	}
	return nil
}

// FileAnswerBody is what the master signs: the question (ID, Nonce, Op,
// Path, Saltenv, as asked) and its answer. Err is the master's answer when
// there is no file ("not found", a refused path); the agent reports it as
// such.
type FileAnswerBody struct {
	ID      string      `cbor:"1,keyasint"`
	Nonce   []byte      `cbor:"2,keyasint"`
	Op      string      `cbor:"3,keyasint"`
	Path    string      `cbor:"4,keyasint,omitempty"`
	Saltenv string      `cbor:"5,keyasint,omitempty"`
	Err     string      `cbor:"6,keyasint,omitempty"`
	Files   []FileEntry `cbor:"7,keyasint,omitempty"`
	// Dirs: directories (op "dirs"), or the empty directories under the
	// directory asked for (op "dir"); relative to the roots.
	Dirs []string `cbor:"8,keyasint,omitempty"`
	// Sealed is a rendered template (op "template"), sealed to the device.
	Sealed []byte `cbor:"9,keyasint,omitempty"`
	// Env is the saltenv the master looked in (the URL's ?saltenv= wins
	// over Saltenv; "base" when none is given).
	Env string `cbor:"10,keyasint,omitempty"`
	// Missing: Err says that no file (or directory) is there, which
	// Salt's cp functions answer with False or "" rather than an error.
	Missing bool `cbor:"11,keyasint,omitempty"`
}

// FileEntry is one file of an answer: its path relative to its root
// ('/'-separated), and its manifest (ops "find" and "dir") or its SHA-256
// alone (op "hash"; list ops give the path alone).
type FileEntry struct {
	Path     string    `cbor:"1,keyasint"`
	SHA256   []byte    `cbor:"2,keyasint,omitempty"`
	Size     int64     `cbor:"3,keyasint,omitempty"`
	Manifest *Manifest `cbor:"4,keyasint,omitempty"`
}

// SignFileAnswer encodes and signs b with the master's key.
func SignFileAnswer(key ed25519.PrivateKey, b *FileAnswerBody) (Signed, error) {
	return seal(key, domainFile, b)
}

// OpenFileAnswer verifies s with the master's public key and decodes and
// checks the body's bounds. The caller checks that the body answers its
// question (ID, Nonce, Op, Path, Saltenv).
func OpenFileAnswer(master ed25519.PublicKey, s Signed) (*FileAnswerBody, error) {
	if len(s.Sig) != ed25519.SignatureSize {
		return nil, Errorf(KindBadSig, "file answer signature is %d bytes, want %d", len(s.Sig), ed25519.SignatureSize)
	}
	b := new(FileAnswerBody)
	if err := s.open(master, nil, domainFile, b); err != nil {
		return nil, err
	}
	if err := b.validate(); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *FileAnswerBody) validate() error {
	switch {
	case !ValidFileOp(b.Op):
		return Errorf(KindMalformed, "file answer op %.32q unknown", b.Op)
	case len(b.Files) > MaxFileEntries || len(b.Dirs) > MaxFileEntries:
		return Errorf(KindTooLarge, "file answer of %d files and %d directories, limit %d each", len(b.Files), len(b.Dirs), MaxFileEntries)
	case len(b.Err) > MaxFileErr:
		return Errorf(KindTooLarge, "file answer error of %d bytes, limit %d", len(b.Err), MaxFileErr)
	case len(b.Sealed) > MaxTemplate+SealOverhead:
		return Errorf(KindTooLarge, "file answer template of %d bytes, limit %d", len(b.Sealed), MaxTemplate+SealOverhead)
	}
	for _, f := range b.Files {
		if f.Path == "" || len(f.Path) > MaxFilePath {
			return Errorf(KindMalformed, "file answer path of %d bytes, want 1 to %d", len(f.Path), MaxFilePath)
		}
		if f.SHA256 != nil && len(f.SHA256) != BlobHashSize {
			return Errorf(KindMalformed, "file answer hash of %s is %d bytes", f.Path, len(f.SHA256))
		}
		if f.Manifest != nil {
			if err := f.Manifest.Validate(); err != nil {
				return Errorf(KindMalformed, "file answer %s: %v", f.Path, err)
			}
		}
	}
	for _, d := range b.Dirs {
		if d == "" || len(d) > MaxFilePath {
			return Errorf(KindMalformed, "file answer directory of %d bytes, want 1 to %d", len(d), MaxFilePath)
		}
	}
	return nil
}

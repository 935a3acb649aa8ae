package master

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/master/fileserver"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/render"
)

// The file server's questions (protocol.FileQuery, capability 14): an
// agent's cp.* functions ask, on the agent's own session (through any
// relay), about salt:// files; the master answers from file_roots
// (m.files, read-only; the first root holding a path wins), registers each
// file it names by manifest in the blob index (m.blobs), so that its
// chunks are served to whoever asks by hash, and signs the answer over the
// question: the session's id, the request's nonce, op, path and saltenv.
// A template (cp.get_template) is rendered here, for the session's device,
// with its grains and pillar, and sealed to it: the default agent build
// carries no Jinja, and a rendering may hold pillar values.
//
// Bounds: a session has at most maxSessionFileQueries questions being
// answered (more are refused at once), the master maxFileCalls at a time
// (the rest wait); a "dir" answer names at most maxDirFiles files; an
// answer must fit in one frame; a template source is at most
// maxTemplateSource bytes and its rendering protocol.MaxTemplate.

const (
	maxSessionFileQueries = 4
	maxFileCalls          = 8
	maxDirFiles           = 10_000
	maxTemplateSource     = 4 << 20
	fileQueryTimeout      = time.Minute
	// maxFileAnswer leaves room in a frame for FileAnswer's own fields.
	maxFileAnswer = protocol.DefaultMaxFrame - 1024
)

var (
	fileCallSlots = make(chan struct{}, maxFileCalls)
	fileQueries   sync.Map // *session -> *int: questions being answered (under fileQueriesMu)
	fileQueriesMu sync.Mutex
	// fileRenderer renders cp.get_template's templates; made on first use.
	fileRenderer = sync.OnceValue(func() *render.Renderer { return render.New(render.Options{}) })
)

// answerFileQuery answers q on s in the background (a directory's files
// may need hashing).
func (m *Master) answerFileQuery(s *session, q *protocol.FileQuery) {
	if !takeFileQuery(s) {
		m.sendFileAnswer(s, &protocol.FileAnswer{Req: q.Req,
			Err: fmt.Sprintf("busy: more than %d file server questions of %s at once", maxSessionFileQueries, s.id)})
		return
	}
	m.connWG.Add(1)
	go func() {
		defer m.connWG.Done()
		defer doneFileQuery(s)
		select {
		case fileCallSlots <- struct{}{}:
		case <-s.done:
			return
		case <-m.closing:
			return
		}
		defer func() { <-fileCallSlots }()
		ctx, cancel := context.WithTimeout(context.Background(), fileQueryTimeout)
		defer cancel()
		body := m.fileAnswer(ctx, s, q)
		signed, err := protocol.SignFileAnswer(m.id.Priv, body)
		if err == nil && len(signed.Body) > maxFileAnswer {
			body = &protocol.FileAnswerBody{ID: body.ID, Nonce: body.Nonce, Op: body.Op, Path: body.Path, Saltenv: body.Saltenv,
				Env: body.Env, Err: fmt.Sprintf("the answer is %d bytes, more than one message carries (%d): ask for a narrower prefix or directory", len(signed.Body), maxFileAnswer)}
			signed, err = protocol.SignFileAnswer(m.id.Priv, body)
		}
		if err != nil {
			s.log.Warn("file answer not signed", zap.Error(err))
			m.sendFileAnswer(s, &protocol.FileAnswer{Req: q.Req, Err: "the master could not sign its answer"})
			return
		}
		m.sendFileAnswer(s, &protocol.FileAnswer{Req: q.Req, Signed: signed})
	}()
}

func takeFileQuery(s *session) bool {
	fileQueriesMu.Lock()
	defer fileQueriesMu.Unlock()
	v, _ := fileQueries.LoadOrStore(s, new(int))
	n := v.(*int)
	if *n >= maxSessionFileQueries {
		return false
	}
	*n++
	return true
}

func doneFileQuery(s *session) {
	fileQueriesMu.Lock()
	defer fileQueriesMu.Unlock()
	v, ok := fileQueries.Load(s)
	if !ok {
		return
	}
	n := v.(*int)
	if *n--; *n <= 0 {
		fileQueries.Delete(s)
	}
}

func (m *Master) sendFileAnswer(s *session, a *protocol.FileAnswer) {
	b, err := protocol.Encode(a)
	if err != nil {
		s.log.Warn("encode file answer", zap.Error(err))
		return
	}
	s.send(b)
}

// fileAnswer is the answer to q for s's device, unsigned.
func (m *Master) fileAnswer(ctx context.Context, s *session, q *protocol.FileQuery) *protocol.FileAnswerBody {
	b := &protocol.FileAnswerBody{ID: s.id, Nonce: q.Nonce, Op: q.Op, Path: q.Path, Saltenv: q.Saltenv}
	env := q.Saltenv
	if env == "" {
		env = "base"
	}
	b.Env = env
	fail := func(err error) *protocol.FileAnswerBody {
		b.Files, b.Dirs, b.Sealed = nil, nil, nil
		var fe *fileserver.Error
		switch {
		case errors.Is(err, fileserver.ErrNotFound):
			b.Missing = true
			b.Err = err.Error()
		case errors.Is(err, fileserver.ErrRefused), errors.Is(err, fileserver.ErrTooLarge):
			b.Err = err.Error()
		case errors.As(err, new(*shownErr)):
			b.Err = err.Error()
		case errors.As(err, &fe):
			// An I/O error: its text names the master's directories.
			s.log.Warn("file server", zap.String("op", q.Op), zap.String("path", q.Path), zap.Error(err))
			b.Err = fe.Msg + ": the master could not read it"
		default:
			s.log.Warn("file server", zap.String("op", q.Op), zap.String("path", q.Path), zap.Error(err))
			b.Err = "the master could not answer: see its log"
		}
		if len(b.Err) > protocol.MaxFileErr {
			b.Err = b.Err[:protocol.MaxFileErr]
		}
		return b
	}
	u := q.Path
	if !strings.HasPrefix(u, fileserver.Scheme) {
		u = fileserver.Scheme + u
	}
	if _, senv := fileserver.ParseURL(u); senv != "" {
		b.Env = senv
	}
	switch q.Op {
	case protocol.FileFind, protocol.FileHash:
		f, err := m.files.Open(u, env)
		if err != nil {
			return fail(err)
		}
		b.Env = f.Env
		sum, err := hex.DecodeString(f.SHA256)
		if err != nil {
			return fail(err)
		}
		e := protocol.FileEntry{Path: f.Rel, SHA256: sum, Size: f.Size}
		if q.Op == protocol.FileFind {
			man, err := m.blobs.Add(f.Path)
			if err != nil {
				return fail(err)
			}
			if !bytes.Equal(man.SHA256, sum) {
				// Changed between the two reads: the manifest is what
				// will be served.
				e.SHA256, e.Size = man.SHA256, man.Size
			}
			e.Manifest = &man
		}
		b.Files = []protocol.FileEntry{e}
	case protocol.FileList:
		files, err := m.files.List(env, q.Path)
		if err != nil {
			return fail(err)
		}
		if len(files) > protocol.MaxFileEntries {
			return fail(shownf("%d files in saltenv '%s' under '%s', more than %d: ask for a narrower prefix", len(files), env, q.Path, protocol.MaxFileEntries))
		}
		for _, f := range files {
			b.Files = append(b.Files, protocol.FileEntry{Path: f})
		}
	case protocol.FileDirs:
		_, dirs, err := m.files.ListDir(fileserver.Scheme, env)
		if err != nil {
			return fail(err)
		}
		prefix := strings.Trim(q.Path, "/")
		for _, d := range dirs {
			if strings.HasPrefix(d, prefix) {
				b.Dirs = append(b.Dirs, d)
			}
		}
		if len(b.Dirs) > protocol.MaxFileEntries {
			return fail(shownf("%d directories in saltenv '%s' under '%s', more than %d: ask for a narrower prefix", len(b.Dirs), env, q.Path, protocol.MaxFileEntries))
		}
	case protocol.FileDir:
		files, dirs, err := m.files.ListDir(u, env)
		if err != nil {
			return fail(err)
		}
		if len(files) > maxDirFiles {
			return fail(shownf("%d files under %s, more than %d: copy its subdirectories one by one", len(files), u, maxDirFiles))
		}
		for _, rel := range files {
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			// "|": the path is literal (a '?' in a file name is no query).
			f, err := m.files.Open(fileserver.Scheme+"|"+rel, b.Env)
			if err != nil {
				return fail(err)
			}
			man, err := m.blobs.Add(f.Path)
			if err != nil {
				return fail(err)
			}
			b.Files = append(b.Files, protocol.FileEntry{Path: f.Rel, SHA256: man.SHA256, Size: man.Size, Manifest: &man})
		}
		b.Dirs = emptyDirs(files, dirs)
	case protocol.FileTemplate:
		out, err := m.renderFileFor(s, u, env, q.Context)
		if err != nil {
			return fail(err)
		}
		pub, err := m.sealKey(s)
		if err != nil {
			return fail(&shownErr{err.Error()})
		}
		if b.Sealed, err = protocol.SealTo(pub, s.id, protocol.PurposeFile, q.Nonce, out); err != nil {
			return fail(err)
		}
	}
	return b
}

// emptyDirs are the directories of dirs that hold neither a file of files
// nor another directory (Salt's file_list_emptydirs), for cp.get_dir.
func emptyDirs(files, dirs []string) []string {
	full := map[string]bool{}
	mark := func(p string) {
		for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p[:i], '/') {
			full[p[:i]] = true
		}
	}
	for _, f := range files {
		mark(f)
	}
	for _, d := range dirs {
		mark(d)
	}
	var out []string
	for _, d := range dirs {
		if !full[d] {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// renderFileFor renders the template u names (Jinja) for s's device: its
// grains, its pillar, saltenv, and ctx (cp.get_template's keyword
// arguments) over them, as Salt's cp.get_template does on the minion.
func (m *Master) renderFileFor(s *session, u, env string, ctx map[string]any) ([]byte, error) {
	f, src, err := m.files.Read(u, env, maxTemplateSource)
	if err != nil {
		return nil, err
	}
	grains := m.minions.grainsOf(s.id)
	if grains == nil {
		grains = map[string]any{}
	}
	vars := map[string]any{"grains": grains, "pillar": m.pillarOf(s.id), "saltenv": f.Env,
		"source": u, "tpldir": dirOf(f.Rel), "tplpath": f.Rel}
	for k, v := range ctx {
		vars[k] = v
	}
	text, err := fileRenderer().RenderText(u, src, render.Context{Vars: vars})
	if err != nil {
		return nil, shownf("render %s: %v", u, err)
	}
	// Jinja drops the template's last newline; Salt puts it back
	// (salt/utils/templates.py render_jinja_tmpl).
	if bytes.HasSuffix(src, []byte("\n")) && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if len(text) > protocol.MaxTemplate {
		return nil, shownf("%s renders to %d bytes, more than the %d a template may (cp.get_file moves larger files)", u, len(text), protocol.MaxTemplate)
	}
	return []byte(text), nil
}

func dirOf(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

// shownErr is an error whose text the device is told (a template's
// error, a listing too large); others are logged, and the device told
// less, as their text may name the master's directories.
type shownErr struct{ msg string }

func (e *shownErr) Error() string { return e.msg }

func shownf(format string, a ...any) error { return &shownErr{fmt.Sprintf(format, a...)} }

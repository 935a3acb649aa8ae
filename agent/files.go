package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/protocol"
)

// The master's file server for cp.* (protocol.FileQuery, capability 14):
// the agent asks on its session (through its relay, unchanged) with a
// fresh nonce; the master answers with a FileAnswerBody it signed over this
// device's id, the nonce and the question. The agent opens it with the
// pinned master key and checks that it answers this question, so a relay
// cannot answer with another device's or an older answer, nor change a
// manifest. Files are then fetched by chunks (Fetcher: the relay's cache),
// each checked against the signed manifest. A rendered template comes
// sealed to this device (it may hold pillar).

// fileQueryTimeout bounds the wait for one answer (the master may hash a
// directory's files first).
const fileQueryTimeout = 90 * time.Second

type fileQueryState struct {
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan *protocol.FileAnswer
}

// fileReply hands a FileAnswer to the question waiting for it.
func (a *Agent) fileReply(d *protocol.FileAnswer) {
	a.fq.mu.Lock()
	ch, ok := a.fq.waiting[d.Req]
	delete(a.fq.waiting, d.Req)
	a.fq.mu.Unlock()
	if !ok {
		a.log.Debug("file answer nobody waits for; dropped", zap.Uint64("req", d.Req))
		return
	}
	ch <- d
}

// fileQuery asks the master q (Op, Path, Saltenv, Context) and returns its
// verified answer. The master's own error (not found, refused) is the
// returned body's Err.
func (a *Agent) fileQuery(ctx context.Context, q protocol.FileQuery) (*protocol.FileAnswerBody, error) {
	var l *link
	a.mine.mu.Lock()
	for _, k := range a.links {
		if a.mine.caps[k.out] >= protocol.CapFileQuery {
			l = k
			break
		}
	}
	a.mine.mu.Unlock()
	if l == nil {
		if a.nconn.Load() == 0 {
			return nil, errors.New("no master connected")
		}
		return nil, fmt.Errorf("the master (or its relay) is too old to serve files (capability %d wanted)", protocol.CapFileQuery)
	}
	q.Nonce = make([]byte, 16)
	if _, err := rand.Read(q.Nonce); err != nil {
		return nil, err
	}
	ch := make(chan *protocol.FileAnswer, 1)
	a.fq.mu.Lock()
	if a.fq.waiting == nil {
		a.fq.waiting = make(map[uint64]chan *protocol.FileAnswer)
	}
	a.fq.next++
	q.Req = a.fq.next
	a.fq.waiting[q.Req] = ch
	a.fq.mu.Unlock()
	defer func() {
		a.fq.mu.Lock()
		delete(a.fq.waiting, q.Req)
		a.fq.mu.Unlock()
	}()
	l.out.push(&q)
	t := time.NewTimer(fileQueryTimeout)
	defer t.Stop()
	var ans *protocol.FileAnswer
	select {
	case ans = <-ch:
	case <-t.C:
		return nil, fmt.Errorf("no answer from the file server within %s", fileQueryTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if ans.Err != "" {
		return nil, fmt.Errorf("file server: %s", ans.Err)
	}
	b, err := a.checkFileAnswer(ans.Signed, &q)
	if err != nil {
		a.log.Warn("refusing the file server's answer", zap.String("op", q.Op), zap.String("path", q.Path), zap.Error(err))
		return nil, fmt.Errorf("refused the file server's answer: %w", err)
	}
	return b, nil
}

// checkFileAnswer opens s with the pinned master key and checks that it
// answers q, asked by this device.
func (a *Agent) checkFileAnswer(s protocol.Signed, q *protocol.FileQuery) (*protocol.FileAnswerBody, error) {
	pub := a.masterPub.Load()
	if pub == nil {
		return nil, errors.New("the master's key is not pinned yet")
	}
	b, err := protocol.OpenFileAnswer(*pub, s)
	if err != nil {
		return nil, err
	}
	if b.ID != a.cfg.ID || !bytes.Equal(b.Nonce, q.Nonce) || b.Op != q.Op || b.Path != q.Path || b.Saltenv != q.Saltenv {
		return nil, fmt.Errorf("the answer is to another question (%s %s %q for %s)", b.Op, b.Path, b.Saltenv, b.ID)
	}
	return b, nil
}

// Files is the master's file server as cp.* sees it; a masterless agent
// has none (cp.* then reads its own file_roots).
func (a *Agent) Files() exec.FileClient {
	if a.masterless() {
		return nil
	}
	return masterFiles{a}
}

type masterFiles struct{ a *Agent }

// ask is fileQuery with the master's error as an error (wrapping
// exec.ErrFileMissing for a file that is not there).
func (f masterFiles) ask(ctx context.Context, q protocol.FileQuery) (*protocol.FileAnswerBody, error) {
	b, err := f.a.fileQuery(ctx, q)
	if err != nil {
		return nil, err
	}
	if b.Missing {
		return nil, fmt.Errorf("%s: %w", b.Err, exec.ErrFileMissing)
	}
	if b.Err != "" {
		return nil, errors.New(b.Err)
	}
	return b, nil
}

func remoteFile(e protocol.FileEntry, env string) exec.RemoteFile {
	rf := exec.RemoteFile{Path: e.Path, Env: env, SHA256: e.SHA256, Size: e.Size}
	if e.Manifest != nil {
		rf.Ref = *e.Manifest
		rf.SHA256, rf.Size = e.Manifest.SHA256, e.Manifest.Size
	}
	return rf
}

func (f masterFiles) one(ctx context.Context, op, u, env string) (exec.RemoteFile, error) {
	b, err := f.ask(ctx, protocol.FileQuery{Op: op, Path: u, Saltenv: env})
	if err != nil {
		return exec.RemoteFile{}, err
	}
	if len(b.Files) != 1 || (op == protocol.FileFind && b.Files[0].Manifest == nil) || len(b.Files[0].SHA256) == 0 && b.Files[0].Manifest == nil {
		return exec.RemoteFile{}, fmt.Errorf("the file server answered %s %s with %d files", op, u, len(b.Files))
	}
	return remoteFile(b.Files[0], b.Env), nil
}

func (f masterFiles) Find(ctx context.Context, u, env string) (exec.RemoteFile, error) {
	return f.one(ctx, protocol.FileFind, u, env)
}

func (f masterFiles) Hash(ctx context.Context, u, env string) (exec.RemoteFile, error) {
	return f.one(ctx, protocol.FileHash, u, env)
}

func (f masterFiles) List(ctx context.Context, env, prefix string) ([]string, error) {
	b, err := f.ask(ctx, protocol.FileQuery{Op: protocol.FileList, Path: prefix, Saltenv: env})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(b.Files))
	for i, e := range b.Files {
		out[i] = e.Path
	}
	return out, nil
}

func (f masterFiles) Dirs(ctx context.Context, env, prefix string) ([]string, error) {
	b, err := f.ask(ctx, protocol.FileQuery{Op: protocol.FileDirs, Path: prefix, Saltenv: env})
	if err != nil {
		return nil, err
	}
	return b.Dirs, nil
}

func (f masterFiles) Dir(ctx context.Context, u, env string) ([]exec.RemoteFile, []string, error) {
	b, err := f.ask(ctx, protocol.FileQuery{Op: protocol.FileDir, Path: u, Saltenv: env})
	if err != nil {
		return nil, nil, err
	}
	out := make([]exec.RemoteFile, 0, len(b.Files))
	for _, e := range b.Files {
		if e.Manifest == nil {
			return nil, nil, fmt.Errorf("the file server named %s without a manifest", e.Path)
		}
		out = append(out, remoteFile(e, b.Env))
	}
	return out, b.Dirs, nil
}

func (f masterFiles) Template(ctx context.Context, u, env string, vars map[string]any) ([]byte, error) {
	q := protocol.FileQuery{Op: protocol.FileTemplate, Path: u, Saltenv: env}
	if len(vars) > 0 {
		q.Context = vars
	}
	b, err := f.a.fileQuery(ctx, q)
	if err != nil {
		return nil, err
	}
	switch {
	case b.Missing:
		return nil, fmt.Errorf("%s: %w", b.Err, exec.ErrFileMissing)
	case b.Err != "":
		return nil, fmt.Errorf("%w: %s", exec.ErrTemplateFailed, b.Err)
	}
	plain, err := f.a.id.Open(f.a.cfg.ID, protocol.PurposeFile, b.Nonce, b.Sealed)
	if err != nil {
		return nil, fmt.Errorf("open the rendered template: %w", err)
	}
	return plain, nil
}

func (f masterFiles) Get(ctx context.Context, rf exec.RemoteFile, dst string) error {
	m, ok := rf.Ref.(protocol.Manifest)
	if !ok {
		return fmt.Errorf("%s has no manifest", rf.Path)
	}
	return f.a.Fetcher().Fetch(ctx, m, dst)
}

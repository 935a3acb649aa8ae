package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/halite-fleet/halite/internal/atomicfile"
	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/protocol"
)

// jobLogFile is the job log under cachedir.
const jobLogFile = "jobs.log"

// Record kinds of the job log. Every body is CBOR.
const (
	recJobTaken  = 's' // a job was taken and is about to run: a jobRecord
	recJobDone   = 'd' // the job's return is in the outbox: a jobRecord (JID and Master)
	recJobMaster = 'm' // what is known of a master (written by compaction): a masterMark
)

// jobLogKeep is how many jobs the log remembers. Past it the oldest is
// forgotten; if it is still within job_replay_window of its master's
// newest job (a job storm), its master's floor rises to its jid, so that it
// is refused all the same.
const jobLogKeep = 1024

// maxJobRecord bounds a record's body when the log is read back; maxFun
// bounds the function name a record keeps (only for the return of a job
// killed by the agent's death).
const (
	maxJobRecord = 64 << 10
	maxFun       = 256
)

// clockSet is the earliest time an agent's clock is taken to be set: a
// device without a real-time clock boots at 1970 until NTP answers, and
// its clock says nothing about a job's age until then.
var clockSet = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// jobRecord is a job the agent took.
type jobRecord struct {
	JID    string `cbor:"1,keyasint"`
	Master string `cbor:"2,keyasint,omitempty"` // the job's Master (signed)
	Issued int64  `cbor:"3,keyasint,omitempty"` // the job's Issued (signed)
	Fun    string `cbor:"4,keyasint,omitempty"`
	Link   string `cbor:"5,keyasint,omitempty"` // the master address its return goes to
}

func (r jobRecord) key() jobKey { return jobKey{r.Master, r.JID} }

// jobKey names a job: jids are unique per master (a master's JIDGen), and
// two masters of a set may make the same one.
type jobKey struct{ master, jid string }

// masterMark is what the log knows of one master's jobs.
type masterMark struct {
	Master string `cbor:"1,keyasint,omitempty"`
	Newest int64  `cbor:"2,keyasint,omitempty"` // Issued of its newest job
	Floor  string `cbor:"3,keyasint,omitempty"` // its jids up to this one are refused
}

// jobLog keeps jobs from running twice: a job a relay recorded and sends
// again, even after the agent restarted, is refused. It remembers the
// jobs the agent took (their master and jid), at most jobLogKeep, and per
// master the issue time of its newest job; a job issued job_replay_window
// before that, or before the agent's clock once the clock is set, is
// refused, so the jobs it forgot need no remembering.
//
// It also knows which jobs are running: a job is recorded as taken before
// it runs, and as done once its return is in the outbox. A job still
// taken when the agent starts was running when the agent died; the agent
// reports it killed (killedJobs).
//
// The log (cachedir/jobs.log) is append-only, in reclog records, rewritten
// when it holds three times what it must. A record reaches the kernel's
// page cache before the job runs, so that it survives the agent's death
// at once; syncLoop makes it durable against power loss within
// syncInterval, as the outbox spool does (one fsync per job would make a
// fleet-wide job cost every device's flash a sync per job). A torn last
// record is dropped on open.
type jobLog struct {
	path   string
	window time.Duration    // job_replay_window; 0: no time checks
	now    func() time.Time // time.Now but in tests

	mu      sync.Mutex
	f       *os.File
	seen    map[jobKey]jobRecord
	order   []jobKey // of seen, oldest first
	masters map[string]*masterMark
	running map[jobKey]jobRecord
	records int  // records in the file
	dirty   bool // written since the last fsync
}

// openJobLog opens or creates dir/jobs.log.
func openJobLog(dir string, window time.Duration) (*jobLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open job log %s: %w", dir, err)
	}
	l := &jobLog{
		path: filepath.Join(dir, jobLogFile), window: window, now: time.Now,
		seen: map[jobKey]jobRecord{}, masters: map[string]*masterMark{}, running: map[jobKey]jobRecord{},
	}
	if err := l.load(); err != nil {
		return nil, fmt.Errorf("open job log %s: %w", l.path, err)
	}
	if err := l.compact(); err != nil {
		return nil, fmt.Errorf("open job log %s: %w", l.path, err)
	}
	return l, nil
}

// load reads the log up to its end or its first damaged record. A record
// that does not decode is skipped.
func (l *jobLog) load() error {
	b, err := os.ReadFile(l.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for {
		rec, n, ok := reclog.Next(b, maxJobRecord)
		if !ok {
			return nil
		}
		b = b[n:]
		switch rec.Kind {
		case recJobTaken, recJobDone:
			var r jobRecord
			if protocol.Unmarshal(rec.Body, &r) != nil || !protocol.IsJID(r.JID) {
				continue
			}
			if rec.Kind == recJobDone {
				delete(l.running, r.key())
				continue
			}
			if _, ok := l.seen[r.key()]; !ok {
				l.remember(r)
				l.running[r.key()] = r
			}
		case recJobMaster:
			var m masterMark
			if protocol.Unmarshal(rec.Body, &m) != nil || (m.Floor != "" && !protocol.IsJID(m.Floor)) {
				continue
			}
			mm := l.mark(m.Master)
			mm.Newest = max(mm.Newest, m.Newest)
			mm.Floor = max(mm.Floor, m.Floor)
		}
	}
}

// mark returns the mark of master, made if new.
func (l *jobLog) mark(master string) *masterMark {
	m := l.masters[master]
	if m == nil {
		m = &masterMark{Master: master}
		l.masters[master] = m
	}
	return m
}

// remember adds r to the jobs seen, forgetting the oldest past
// jobLogKeep. l.mu is held or l is not shared yet.
func (l *jobLog) remember(r jobRecord) {
	l.seen[r.key()] = r
	l.order = append(l.order, r.key())
	m := l.mark(r.Master)
	if r.Issued > 0 {
		n := r.Issued
		if now := l.now(); l.window > 0 && now.After(clockSet) {
			// A master whose clock ran ahead once must not block its
			// own jobs for long after.
			n = min(n, now.Add(l.window).Unix())
		}
		m.Newest = max(m.Newest, n)
	}
	for len(l.order) > jobLogKeep {
		k := l.order[0]
		l.order[0] = jobKey{}
		l.order = l.order[1:]
		old, ok := l.seen[k]
		if !ok {
			continue
		}
		delete(l.seen, k)
		if _, run := l.running[k]; run {
			// Still running: still reported killed should the agent
			// die, and still refused below by the floor.
			l.seen[k] = old
			l.order = append(l.order, k)
			if len(l.running) >= jobLogKeep {
				break
			}
			continue
		}
		// A job the newest of its master's puts past the window is
		// refused without being remembered; one still within it (a job
		// storm) is refused by its master's floor. (Not by the agent's
		// clock: a device's clock may be lost at the next boot.)
		if om := l.mark(old.Master); !l.pastNewest(om, old.Issued) {
			om.Floor = max(om.Floor, old.JID)
		}
	}
}

// pastNewest reports whether a job issued at issued (Unix seconds; 0: not
// said) is older than job_replay_window before the newest job of the
// master of m.
func (l *jobLog) pastNewest(m *masterMark, issued int64) bool {
	return l.window > 0 && issued > 0 && m != nil && m.Newest != 0 && time.Unix(issued, 0).Before(time.Unix(m.Newest, 0).Add(-l.window))
}

// tooOld says why a job issued at issued by the master of m is too old to
// run, or "" if it is not.
func (l *jobLog) tooOld(m *masterMark, issued int64) string {
	if l.window <= 0 || issued == 0 {
		return ""
	}
	t := time.Unix(issued, 0)
	if l.pastNewest(m, issued) {
		return fmt.Sprintf("issued %s, more than job_replay_window (%s) before the newest job seen from its master (%s)",
			t.UTC().Format(time.RFC3339), l.window, time.Unix(m.Newest, 0).UTC().Format(time.RFC3339))
	}
	if now := l.now(); now.After(clockSet) && t.Before(now.Add(-l.window)) {
		return fmt.Sprintf("issued %s, more than job_replay_window (%s) ago by this agent's clock (%s); check both clocks",
			t.UTC().Format(time.RFC3339), l.window, now.UTC().Format(time.RFC3339))
	}
	return ""
}

// take decides whether job b may run, and if so records it as taken
// (running, on its way to link's outbox) before it returns. reason says
// why a job may not run. err is a failure to write the log: the job runs
// all the same (a device whose disk is full must still take the job that
// frees it), and is refused again by this process, not after a restart.
func (l *jobLog) take(b *protocol.JobBody, link string) (ok bool, reason string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := jobRecord{JID: b.JID, Master: b.Master, Issued: b.Issued, Fun: b.Fun, Link: link}
	if len(r.Fun) > maxFun {
		r.Fun = r.Fun[:maxFun]
	}
	if _, dup := l.seen[r.key()]; dup {
		return false, "already taken (a replay)", nil
	}
	m := l.masters[r.Master]
	if m != nil && m.Floor != "" && r.JID <= m.Floor {
		return false, fmt.Sprintf("older than the jobs this agent forgot (jid %s of its master and before)", m.Floor), nil
	}
	if why := l.tooOld(m, r.Issued); why != "" {
		return false, why, nil
	}
	l.remember(r)
	l.running[r.key()] = r
	return true, "", l.append(recJobTaken, r)
}

// done records that job b's return is in the outbox.
func (l *jobLog) done(b *protocol.JobBody) error {
	return l.finish(jobRecord{JID: b.JID, Master: b.Master})
}

// finish records that the job r names is no longer running.
func (l *jobLog) finish(r jobRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.running[r.key()]; !ok {
		return nil
	}
	delete(l.running, r.key())
	if l.records > 3*jobLogKeep {
		return l.compact()
	}
	return l.append(recJobDone, jobRecord{JID: r.JID, Master: r.Master})
}

// killedJobs returns the jobs that were running when the agent last died.
func (l *jobLog) killedJobs() []jobRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []jobRecord
	for _, k := range l.order {
		if r, ok := l.running[k]; ok {
			out = append(out, r)
		}
	}
	return out
}

// append writes one record. l.mu is held.
func (l *jobLog) append(kind byte, v any) error {
	if l.f == nil {
		return fmt.Errorf("write job log %s: closed", l.path)
	}
	body, err := protocol.Marshal(v)
	if err != nil {
		return fmt.Errorf("write job log %s: %w", l.path, err)
	}
	l.dirty = true
	l.records++
	if _, err := l.f.Write(reclog.Append(nil, kind, 0, body)); err != nil {
		return fmt.Errorf("write job log %s: %w", l.path, err)
	}
	return nil
}

// compact rewrites the log with what it must keep, durably, and reopens
// it for appending. l.mu is held or l is not shared yet.
func (l *jobLog) compact() error {
	var buf []byte
	n := 0
	add := func(kind byte, v any) error {
		body, err := protocol.Marshal(v)
		if err != nil {
			return err
		}
		buf = reclog.Append(buf, kind, 0, body)
		n++
		return nil
	}
	for _, m := range l.masters {
		if m.Newest == 0 && m.Floor == "" {
			continue
		}
		if err := add(recJobMaster, m); err != nil {
			return err
		}
	}
	for _, k := range l.order {
		r, ok := l.seen[k]
		if !ok {
			continue
		}
		if err := add(recJobTaken, r); err != nil {
			return err
		}
		if _, run := l.running[k]; !run {
			if err := add(recJobDone, jobRecord{JID: r.JID, Master: r.Master}); err != nil {
				return err
			}
		}
	}
	// On failure the old file stays, and so does l.f, appending to it.
	if err := atomicfile.Write(l.path, buf, 0o600); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.records = f, n
	return nil
}

// syncLoop fsyncs the log, at most every syncInterval, when something was
// written since the last sync, until ctx ends (close syncs the rest).
func (l *jobLog) syncLoop(ctx context.Context) error {
	t := time.NewTicker(syncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		l.mu.Lock()
		f, dirty := l.f, l.dirty
		l.dirty = false
		l.mu.Unlock()
		if f != nil && dirty {
			if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
				return fmt.Errorf("sync job log %s: %w", l.path, err)
			}
		}
	}
}

// close syncs and closes the log.
func (l *jobLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.f
	l.f = nil
	if f == nil {
		return nil
	}
	serr := f.Sync()
	if err := f.Close(); err != nil {
		return err
	}
	return serr
}

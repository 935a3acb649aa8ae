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

// key names r's job: jids are unique per master (a master's JIDGen), and
// two masters of a set may make the same one.
func (r jobRecord) key() string { return r.Master + "\x00" + r.JID }

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
	window int64            // job_replay_window in seconds; 0: no time checks
	now    func() time.Time // time.Now but in tests

	mu      sync.Mutex
	f       *os.File
	seen    map[string]jobRecord
	order   []string // of seen, oldest first
	masters map[string]*masterMark
	running map[string]jobRecord
	records int  // records in the file
	dirty   bool // written since the last fsync
}

// openJobLog opens or creates dir/jobs.log.
func openJobLog(dir string, window time.Duration) (*jobLog, error) {
	l := &jobLog{
		path: filepath.Join(dir, jobLogFile), window: int64(window / time.Second), now: time.Now,
		seen: map[string]jobRecord{}, masters: map[string]*masterMark{}, running: map[string]jobRecord{},
	}
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		err = l.load()
	}
	if err == nil {
		err = l.compact()
	}
	if err != nil {
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
	n := r.Issued
	if now := l.now(); now.After(clockSet) {
		// A master whose clock ran ahead once must not block its own
		// jobs for long after.
		n = min(n, now.Unix()+l.window)
	}
	m.Newest = max(m.Newest, n)
	for len(l.order) > jobLogKeep {
		old := l.seen[l.order[0]]
		delete(l.seen, l.order[0])
		l.order = l.order[1:]
		// A job the newest of its master's puts past the window is
		// refused without being remembered; one still within it (a job
		// storm) is refused by its master's floor. (Not by the agent's
		// clock: a device's clock may be lost at the next boot.) A job
		// forgotten while it runs is still in running.
		if om := l.mark(old.Master); !l.pastNewest(om, old.Issued) {
			om.Floor = max(om.Floor, old.JID)
		}
	}
}

// pastNewest reports whether a job issued at issued (Unix seconds; 0: not
// said) is older than job_replay_window before the newest job of the
// master of m.
func (l *jobLog) pastNewest(m *masterMark, issued int64) bool {
	return l.window > 0 && issued > 0 && m != nil && issued < m.Newest-l.window
}

// tooOld says why a job issued at issued by the master of m is too old to
// run, or "" if it is not.
func (l *jobLog) tooOld(m *masterMark, issued int64) string {
	switch {
	case l.window <= 0 || issued == 0:
	case l.pastNewest(m, issued):
		return "issued more than job_replay_window before the newest job seen from its master"
	case l.now().After(clockSet) && issued < l.now().Unix()-l.window:
		return "issued more than job_replay_window ago by this agent's clock (check both clocks)"
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
	if m != nil && r.JID <= m.Floor {
		return false, "older than the jobs this agent forgot (its master's floor)", nil
	}
	if why := l.tooOld(m, r.Issued); why != "" {
		return false, why, nil
	}
	l.remember(r)
	l.running[r.key()] = r
	return true, "", l.append(recJobTaken, &r)
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
	return l.append(recJobDone, &jobRecord{JID: r.JID, Master: r.Master})
}

// append writes one record. l.mu is held.
func (l *jobLog) append(kind byte, v any) error {
	if l.f == nil {
		return fmt.Errorf("write job log %s: closed", l.path)
	}
	b, err := appendRecord(nil, kind, v)
	if err == nil {
		l.dirty = true
		l.records++
		_, err = l.f.Write(b)
	}
	if err != nil {
		return fmt.Errorf("write job log %s: %w", l.path, err)
	}
	return nil
}

// appendRecord appends to dst a record of kind whose body is v in CBOR.
func appendRecord(dst []byte, kind byte, v any) ([]byte, error) {
	body, err := protocol.Marshal(v)
	return reclog.Append(dst, kind, 0, body), err
}

// compact rewrites the log with what it must keep, durably, and reopens
// it for appending. l.mu is held or l is not shared yet.
func (l *jobLog) compact() error {
	var buf []byte
	var err error
	n := 0
	for _, m := range l.masters {
		if err == nil && (m.Newest != 0 || m.Floor != "") {
			buf, err = appendRecord(buf, recJobMaster, m)
			n++
		}
	}
	for _, k := range l.order {
		r := l.seen[k]
		if err == nil {
			buf, err = appendRecord(buf, recJobTaken, &r)
			n++
		}
		if _, run := l.running[k]; !run && err == nil {
			buf, err = appendRecord(buf, recJobDone, &jobRecord{JID: r.JID, Master: r.Master})
			n++
		}
	}
	for k, r := range l.running {
		if _, ok := l.seen[k]; !ok && err == nil {
			buf, err = appendRecord(buf, recJobTaken, &r)
			n++
		}
	}
	if err != nil {
		return err
	}
	// On failure the old file stays, and so does l.f, appending to it.
	if err := atomicfile.Write(l.path, buf, 0o600); err != nil {
		return err
	}
	var f *os.File
	f, err = os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0o600)
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
	return syncLoop(ctx, "job log "+l.path, func() *os.File {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.dirty {
			return nil
		}
		l.dirty = false
		return l.f
	})
}

// close syncs and closes the log.
func (l *jobLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.f
	l.f = nil
	return syncClose(f)
}

package event

import "strings"

// Salt's fixed event tags.
const (
	// TagAuth is fired on every authentication attempt (data: id, act, pub,
	// result).
	TagAuth = "salt/auth"
	// TagKey is fired when a key changes state (data: id, act).
	TagKey = "salt/key"
	// TagMinionStartOld is the legacy start event an agent also fires.
	TagMinionStartOld = "minion_start"
	// TagPresenceChange is fired when agents connect or go away (data: new,
	// lost).
	TagPresenceChange = "salt/presence/change"
	// TagPresencePresent lists the agents present (data: present).
	TagPresencePresent = "salt/presence/present"
)

// TagJobNew is the tag of a published job: salt/job/<jid>/new (data: jid,
// tgt, tgt_type, fun, arg, minions, user, _stamp).
func TagJobNew(jid string) string { return "salt/job/" + jid + "/new" }

// TagJobRet is the tag of a job return: salt/job/<jid>/ret/<id>.
func TagJobRet(jid, id string) string { return "salt/job/" + jid + "/ret/" + id }

// TagMinionStart is the tag an agent fires when it starts:
// salt/minion/<id>/start.
func TagMinionStart(id string) string { return "salt/minion/" + id + "/start" }

// TagRunNew is the tag of a runner starting: salt/run/<jid>/new.
func TagRunNew(jid string) string { return "salt/run/" + jid + "/new" }

// TagRunRet is the tag of a runner's result: salt/run/<jid>/ret.
func TagRunRet(jid string) string { return "salt/run/" + jid + "/ret" }

// TagWheelNew is the tag of a wheel call starting: salt/wheel/<jid>/new.
func TagWheelNew(jid string) string { return "salt/wheel/" + jid + "/new" }

// TagWheelRet is the tag of a wheel call's result: salt/wheel/<jid>/ret.
func TagWheelRet(jid string) string { return "salt/wheel/" + jid + "/ret" }

// TagBeacon is the tag of a beacon event: salt/beacon/<id>/<beacon>/.
// Salt appends the beacon's own suffix (often empty) after the last slash.
func TagBeacon(id, beacon string) string { return "salt/beacon/" + id + "/" + beacon + "/" }

// reservedRoots are the tag trees only the master may fire into.
var reservedRoots = [...]string{
	"salt/job", "salt/auth", "salt/key", "salt/run", "salt/wheel", "salt/presence",
}

// ReservedForMaster reports whether tag belongs to the master alone, so that
// an event an agent sends with it must be refused: salt/job/*, salt/auth,
// salt/key, salt/run/*, salt/wheel/* and salt/presence/* (each root itself
// and everything under it).
func ReservedForMaster(tag string) bool {
	for _, r := range reservedRoots {
		if strings.HasPrefix(tag, r) && (len(tag) == len(r) || tag[len(r)] == '/') {
			return true
		}
	}
	return false
}

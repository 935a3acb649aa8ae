package protocol

// Type is the first byte of every frame: which message follows.
type Type uint8

// Message types. Append only; never renumber.
const (
	// TypeHello opens a connection, agent to master: who the agent is.
	TypeHello Type = 1
	// TypeKeyStatus answers Hello, master to agent: the agent key's state.
	TypeKeyStatus Type = 2
	// TypeJob carries a job signed by the master, master to agent.
	TypeJob Type = 3
	// TypeReturn carries a job's return signed by the agent, agent to master.
	TypeReturn Type = 4
	// TypeEvent carries an event signed by the agent, agent to master.
	TypeEvent Type = 5
	// TypeGrains carries refreshed grains, agent to master.
	TypeGrains Type = 6
	// TypePing asks the peer for a Pong; either direction.
	TypePing Type = 7
	// TypePong answers a Ping with its sequence number.
	TypePong Type = 8
	// TypeError tells the peer why the sender is about to close.
	TypeError Type = 9
	// TypeAck acknowledges returns and events, master to agent: those of
	// the connection up to a sequence number are stored (see Ack).
	TypeAck Type = 10
	// TypeBatch carries several devices' returns and events, relay to
	// master on a relay link's control stream (see Batch).
	TypeBatch Type = 11
	// TypeMineGet asks the master for mine data, agent to master (see MineGet).
	TypeMineGet Type = 12
	// TypeMineData answers a MineGet, master to agent (see MineData).
	TypeMineData Type = 13
	// TypeStateGet asks the master to compile states for the asking
	// agent, agent to master (see StateGet).
	TypeStateGet Type = 14
	// TypeStateJob answers a StateGet, master to agent (see StateJob).
	TypeStateJob Type = 15
	// TypeBlobGet asks for one chunk of a file by its SHA-256, device (or
	// relay) to master (see BlobGet).
	TypeBlobGet Type = 16
	// TypeBlobData answers a BlobGet with the chunk (see BlobData).
	TypeBlobData Type = 17
	// TypeFileQuery asks the master about salt:// files, agent to master
	// (see FileQuery).
	TypeFileQuery Type = 18
	// TypeFileAnswer answers a FileQuery, master to agent (see FileAnswer).
	TypeFileAnswer Type = 19
	// TypePillarGet asks the master for the asking device's pillar, agent
	// to master (see PillarGet).
	TypePillarGet Type = 20
	// TypePillarData answers a PillarGet, master to agent (see PillarData).
	TypePillarData Type = 21
	// TypeProxyCtl asks a relay to add, remove or list run-time proxy
	// minions, master to relay on a link's control stream (see ProxyCtl).
	TypeProxyCtl Type = 22
	// TypeProxyAnswer answers a ProxyCtl, relay to master (see ProxyAnswer).
	TypeProxyAnswer Type = 23
)

var typeNames = [...]string{
	TypeHello: "hello", TypeKeyStatus: "key_status", TypeJob: "job",
	TypeReturn: "return", TypeEvent: "event", TypeGrains: "grains",
	TypePing: "ping", TypePong: "pong", TypeError: "error", TypeAck: "ack",
	TypeBatch: "batch", TypeMineGet: "mine_get", TypeMineData: "mine_data",
	TypeStateGet: "state_get", TypeStateJob: "state_job",
	TypeBlobGet: "blob_get", TypeBlobData: "blob_data",
	TypeFileQuery: "file_query", TypeFileAnswer: "file_answer",
	TypePillarGet: "pillar_get", TypePillarData: "pillar_data",
	TypeProxyCtl: "proxy_ctl", TypeProxyAnswer: "proxy_answer",
}

func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return "type(" + itoa(int(t)) + ")"
}

// Message is one of the protocol's message structs.
type Message interface {
	Type() Type
}

// Encode returns the frame body of m: its type byte followed by its CBOR.
func Encode(m Message) ([]byte, error) {
	b, err := encMode.Marshal(m)
	if err != nil {
		return nil, Errorf(KindMalformed, "encode %s: %v", m.Type(), err)
	}
	out := make([]byte, 1+len(b))
	out[0] = byte(m.Type())
	copy(out[1:], b)
	return out, nil
}

// Decode parses a frame body made by Encode. An unknown type is a
// *ProtoError of KindUnknownType; a body that does not decode, KindMalformed.
func Decode(frame []byte) (Message, error) {
	if len(frame) == 0 {
		return nil, Errorf(KindMalformed, "empty frame")
	}
	var m Message
	switch t := Type(frame[0]); t {
	case TypeHello:
		m = new(Hello)
	case TypeKeyStatus:
		m = new(KeyStatus)
	case TypeJob:
		m = new(Job)
	case TypeReturn:
		m = new(Return)
	case TypeEvent:
		m = new(Event)
	case TypeGrains:
		m = new(Grains)
	case TypePing:
		m = new(Ping)
	case TypePong:
		m = new(Pong)
	case TypeError:
		m = new(Error)
	case TypeAck:
		m = new(Ack)
	case TypeMineGet:
		m = new(MineGet)
	case TypeMineData:
		m = new(MineData)
	case TypeStateGet:
		m = new(StateGet)
	case TypeStateJob:
		m = new(StateJob)
	case TypeBlobGet:
		m = new(BlobGet)
	case TypeBlobData:
		m = new(BlobData)
	case TypeFileQuery:
		m = new(FileQuery)
	case TypeFileAnswer:
		m = new(FileAnswer)
	case TypePillarGet:
		m = new(PillarGet)
	case TypePillarData:
		m = new(PillarData)
	default:
		return nil, Errorf(KindUnknownType, "message type %d", frame[0])
	}
	return decodeInto(frame, m)
}

// DecodeLink is Decode for a relay link's control stream, where a relay
// may also send a Batch. Batch is kept out of Decode so that a device
// agent, which never receives one, does not carry its decoder (the 32-bit
// agents are sized to the last kilobyte).
func DecodeLink(frame []byte) (Message, error) {
	if len(frame) > 0 {
		switch Type(frame[0]) {
		case TypeBatch:
			return decodeInto(frame, new(Batch))
		case TypeProxyCtl:
			return decodeInto(frame, new(ProxyCtl))
		case TypeProxyAnswer:
			return decodeInto(frame, new(ProxyAnswer))
		}
	}
	return Decode(frame)
}

// decodeInto decodes frame's body, after its type byte, into m.
func decodeInto(frame []byte, m Message) (Message, error) {
	// Every message is a CBOR map; null or undefined would otherwise
	// decode, without error, to a zero message.
	if len(frame) < 2 || frame[1]>>5 != 5 {
		return nil, Errorf(KindMalformed, "%s body is not a map", Type(frame[0]))
	}
	if err := Unmarshal(frame[1:], m); err != nil {
		return nil, err
	}
	if v, ok := m.(interface{ validate() error }); ok {
		if err := v.validate(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

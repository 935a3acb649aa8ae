//go:build !(arm || mips || mipsle) || quicdebug

package protocol

// LogEnabled says whether this build has quic-go's debug logging
// (QUIC_GO_LOG_LEVEL), QlogEnabled whether it records qlog events
// (Config.Tracer, Transport.Tracer). Halite's tools/quicfork leaves both out
// of 32-bit ARM and MIPS builds without the quicdebug build tag: see
// halite_nodebug.go.
const (
	LogEnabled  = true
	QlogEnabled = true
)

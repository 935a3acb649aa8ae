//go:build (arm || mips || mipsle) && !quicdebug

package protocol

// LogEnabled says whether this build has quic-go's debug logging
// (QUIC_GO_LOG_LEVEL), QlogEnabled whether it records qlog events
// (Config.Tracer, Transport.Tracer). Halite's tools/quicfork leaves both out
// of 32-bit ARM and MIPS builds, where the agent runs on devices with little
// flash and nothing sets a tracer or the log level: tools/quicfork/nolog
// makes every logging call and qlog nil test in quic-go test these constants
// first, and the compiler drops the code (112 KiB on armv7).
// QUIC_GO_LOG_LEVEL is ignored, and a Config or Transport with a Tracer is
// refused (errNoQlog). Build with -tags quicdebug to have them.
const (
	LogEnabled  = false
	QlogEnabled = false
)

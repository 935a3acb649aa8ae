package proxytest

// Simulated devices for the tests, speaking the real protocols on
// loopback: an ONVIF camera (SOAP 1.2, WS-Security UsernameToken with
// PasswordDigest checked as a camera checks it) and a REST device. The
// SSH device is internal/sshtest.

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

const (
	nsDevice = "http://www.onvif.org/ver10/device/wsdl"
	nsMedia  = "http://www.onvif.org/ver10/media/wsdl"
	nsSchema = "http://www.onvif.org/ver10/schema"
)

// Camera is a simulated ONVIF camera.
type Camera struct {
	User, Password string

	mu      sync.Mutex
	reboots int
	ntp     []string
	srv     *httptest.Server
}

// NewCamera starts a camera on loopback.
func NewCamera(user, password string) *Camera { return NewCameraOn(nil, user, password) }

// NewCameraOn starts a camera on ln (nil: loopback); Close closes it.
func NewCameraOn(ln net.Listener, user, password string) *Camera {
	c := &Camera{User: user, Password: password}
	mux := http.NewServeMux()
	mux.HandleFunc("/onvif/device_service", c.device)
	mux.HandleFunc("/onvif/media_service", c.media)
	c.srv = serveOn(ln, mux)
	return c
}

// serveOn starts an httptest server of h on ln (nil: loopback).
func serveOn(ln net.Listener, h http.Handler) *httptest.Server {
	if ln == nil {
		return httptest.NewServer(h)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	return srv
}

// URL is its device service.
func (c *Camera) URL() string { return c.srv.URL + "/onvif/device_service" }

// Close stops it.
func (c *Camera) Close() { c.srv.Close() }

type envelope struct {
	Header struct {
		Token struct {
			Username string `xml:"Username"`
			Password struct {
				Type  string `xml:"Type,attr"`
				Value string `xml:",chardata"`
			} `xml:"Password"`
			Nonce   string `xml:"Nonce"`
			Created string `xml:"Created"`
		} `xml:"Security>UsernameToken"`
	} `xml:"Header"`
	Body struct {
		Op struct {
			XMLName xml.Name
			Inner   []byte `xml:",innerxml"`
		} `xml:",any"`
	} `xml:"Body"`
}

// authorized checks the UsernameToken as ONVIF Core 5.9.4 says:
// Password = base64(sha1(nonce + created + password)).
func (c *Camera) authorized(e *envelope) bool {
	t := &e.Header.Token
	nonce, err := base64.StdEncoding.DecodeString(t.Nonce)
	if err != nil || t.Username != c.User || !strings.HasSuffix(t.Password.Type, "#PasswordDigest") {
		return false
	}
	h := sha1.New()
	h.Write(nonce)
	h.Write([]byte(t.Created))
	h.Write([]byte(c.Password))
	return base64.StdEncoding.EncodeToString(h.Sum(nil)) == t.Password.Value
}

func soapReply(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/soap+xml")
	fmt.Fprintf(w, `<?xml version="1.0"?><env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope" xmlns:tds="%s" xmlns:trt="%s" xmlns:tt="%s"><env:Body>%s</env:Body></env:Envelope>`, nsDevice, nsMedia, nsSchema, body)
}

func soapFaultReply(w http.ResponseWriter, sub, reason string) {
	w.WriteHeader(http.StatusBadRequest)
	soapReply(w, `<env:Fault><env:Code><env:Value>env:Sender</env:Value><env:Subcode><env:Value>`+sub+`</env:Value></env:Subcode></env:Code><env:Reason><env:Text xml:lang="en">`+reason+`</env:Text></env:Reason></env:Fault>`)
}

func (c *Camera) read(w http.ResponseWriter, r *http.Request) (*envelope, bool) {
	b, _ := io.ReadAll(r.Body)
	var e envelope
	if err := xml.Unmarshal(b, &e); err != nil {
		soapFaultReply(w, "ter:WellFormed", err.Error())
		return nil, false
	}
	if e.Body.Op.XMLName.Local != "GetSystemDateAndTime" && !c.authorized(&e) {
		soapFaultReply(w, "ter:NotAuthorized", "Sender not Authorized")
		return nil, false
	}
	return &e, true
}

func (c *Camera) device(w http.ResponseWriter, r *http.Request) {
	e, ok := c.read(w, r)
	if !ok {
		return
	}
	switch e.Body.Op.XMLName.Local {
	case "GetSystemDateAndTime":
		soapReply(w, `<tds:GetSystemDateAndTimeResponse><tds:SystemDateAndTime><tt:DateTimeType>NTP</tt:DateTimeType></tds:SystemDateAndTime></tds:GetSystemDateAndTimeResponse>`)
	case "GetDeviceInformation":
		soapReply(w, `<tds:GetDeviceInformationResponse><tds:Manufacturer>Acme</tds:Manufacturer><tds:Model>CAM-7</tds:Model><tds:FirmwareVersion>2.4.1</tds:FirmwareVersion><tds:SerialNumber>SN123</tds:SerialNumber><tds:HardwareId>HW9</tds:HardwareId></tds:GetDeviceInformationResponse>`)
	case "GetCapabilities":
		// The camera believes it is at another address (NAT).
		soapReply(w, `<tds:GetCapabilitiesResponse><tds:Capabilities><tt:Device><tt:XAddr>http://10.9.9.9/onvif/device_service</tt:XAddr></tt:Device><tt:Media><tt:XAddr>http://10.9.9.9/onvif/media_service</tt:XAddr></tt:Media></tds:Capabilities></tds:GetCapabilitiesResponse>`)
	case "SystemReboot":
		c.mu.Lock()
		c.reboots++
		c.mu.Unlock()
		soapReply(w, `<tds:SystemRebootResponse><tds:Message>Rebooting in 5 seconds</tds:Message></tds:SystemRebootResponse>`)
	case "SetNTP":
		var set struct {
			Manual []struct {
				IPv4 string `xml:"IPv4Address"`
				DNS  string `xml:"DNSname"`
			} `xml:"NTPManual"`
		}
		xml.Unmarshal([]byte("<x>"+string(e.Body.Op.Inner)+"</x>"), &set)
		c.mu.Lock()
		c.ntp = nil
		for _, m := range set.Manual {
			c.ntp = append(c.ntp, m.IPv4+m.DNS)
		}
		c.mu.Unlock()
		soapReply(w, `<tds:SetNTPResponse/>`)
	default:
		soapFaultReply(w, "ter:ActionNotSupported", e.Body.Op.XMLName.Local)
	}
}

func (c *Camera) media(w http.ResponseWriter, r *http.Request) {
	e, ok := c.read(w, r)
	if !ok {
		return
	}
	switch e.Body.Op.XMLName.Local {
	case "GetProfiles":
		soapReply(w, `<trt:GetProfilesResponse><trt:Profiles token="main" fixed="true"><tt:Name>main</tt:Name></trt:Profiles><trt:Profiles token="sub"/></trt:GetProfilesResponse>`)
	case "GetSnapshotUri":
		token := "?"
		if i := strings.Index(string(e.Body.Op.Inner), "ProfileToken>"); i >= 0 {
			rest := string(e.Body.Op.Inner)[i+len("ProfileToken>"):]
			token = rest[:strings.Index(rest, "<")]
		}
		soapReply(w, `<trt:GetSnapshotUriResponse><trt:MediaUri><tt:Uri>http://10.9.9.9/snap/`+token+`.jpg</tt:Uri></trt:MediaUri></trt:GetSnapshotUriResponse>`)
	default:
		soapFaultReply(w, "ter:ActionNotSupported", e.Body.Op.XMLName.Local)
	}
}

// NewRESTDevice is a REST device: /health answers 200, /api/status a
// JSON body; basic auth user:password is required for /api.
func NewRESTDevice(user, password string, hang <-chan struct{}) *httptest.Server {
	return NewRESTDeviceOn(nil, user, password, hang)
}

// NewRESTDeviceOn is NewRESTDevice on ln (nil: loopback).
func NewRESTDeviceOn(ln net.Listener, user, password string, hang <-chan struct{}) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"method":%q,"path":%q,"body":%q}`, r.Method, r.URL.Path, b)
	})
	return serveOn(ln, mux)
}

// Reboots is how many SystemReboot the camera got.
func (c *Camera) Reboots() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reboots
}

// NTP is the NTP servers last set.
func (c *Camera) NTP() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ntp...)
}

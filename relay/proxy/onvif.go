package proxy

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ONVIF namespaces.
const (
	nsDevice = "http://www.onvif.org/ver10/device/wsdl"
	nsMedia  = "http://www.onvif.org/ver10/media/wsdl"
	nsSchema = "http://www.onvif.org/ver10/schema"
	nsWSSE   = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"
	nsWSU    = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd"
	pwDigest = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordDigest"
	b64Enc   = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-soap-message-security-1.0#Base64Binary"
)

// maxSOAP bounds a device's SOAP answer.
const maxSOAP = 256 << 10

// onvifDevice is proxytype onvif: SOAP 1.2 over HTTP to the device
// service (and the media service it names), authenticated with a
// WS-Security UsernameToken (PasswordDigest) in every request.
type onvifDevice struct {
	m   *Minion
	svc *url.URL // the device service
}

func newONVIF(m *Minion) (*onvifDevice, error) {
	e := &m.o.Entry
	raw := e.URL
	if raw == "" {
		port := e.Port
		if port == 0 {
			port = 80
		}
		raw = "http://" + net.JoinHostPort(e.Host, strconv.Itoa(port)) + "/onvif/device_service"
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("onvif device service url %q: not a URL", raw)
	}
	return &onvifDevice{m: m, svc: u}, nil
}

func (d *onvifDevice) functions() []string {
	return []string{"onvif.capabilities", "onvif.device_info", "onvif.reboot", "onvif.set_ntp", "onvif.snapshot_uri"}
}

// usernameToken is the WS-Security header of one request: PasswordDigest
// is base64(sha1(nonce + created + password)) (the OASIS UsernameToken
// Profile 1.0, section 3.1; ONVIF Core Specification 5.9.4).
func usernameToken(user, password string, now time.Time) (string, error) {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return usernameTokenWith(user, password, nonce, now.UTC().Format("2006-01-02T15:04:05.000Z")), nil
}

func usernameTokenWith(user, password string, nonce []byte, created string) string {
	h := sha1.New()
	h.Write(nonce)
	h.Write([]byte(created))
	h.Write([]byte(password))
	digest := base64.StdEncoding.EncodeToString(h.Sum(nil))
	var b strings.Builder
	b.WriteString(`<wsse:Security s:mustUnderstand="1" xmlns:wsse="` + nsWSSE + `" xmlns:wsu="` + nsWSU + `"><wsse:UsernameToken><wsse:Username>`)
	xml.EscapeText(&b, []byte(user))
	b.WriteString(`</wsse:Username><wsse:Password Type="` + pwDigest + `">` + digest + `</wsse:Password>`)
	b.WriteString(`<wsse:Nonce EncodingType="` + b64Enc + `">` + base64.StdEncoding.EncodeToString(nonce) + `</wsse:Nonce>`)
	b.WriteString(`<wsu:Created>` + created + `</wsu:Created></wsse:UsernameToken></wsse:Security>`)
	return b.String()
}

// soapFault is a SOAP 1.2 fault.
type soapFault struct {
	Code    string `xml:"Code>Value"`
	Subcode string `xml:"Code>Subcode>Value"`
	Reason  string `xml:"Reason>Text"`
}

// soap posts body (one element) to u and decodes the response's Body
// into out.
func (d *onvifDevice) soap(ctx context.Context, u *url.URL, body string, out any, auth bool) error {
	var env strings.Builder
	env.WriteString(`<?xml version="1.0" encoding="UTF-8"?><s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope">`)
	if e := &d.m.o.Entry; auth && e.Username != "" {
		pw, err := d.m.password()
		if err != nil {
			return err
		}
		tok, err := usernameToken(e.Username, pw, time.Now())
		if err != nil {
			return err
		}
		env.WriteString("<s:Header>" + tok + "</s:Header>")
	}
	env.WriteString("<s:Body>" + body + "</s:Body></s:Envelope>")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(env.String()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", `application/soap+xml; charset=utf-8`)
	resp, err := d.m.o.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("onvif %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSOAP+1))
	if err != nil {
		return fmt.Errorf("onvif %s: read: %w", u.Host, err)
	}
	if len(b) > maxSOAP {
		return fmt.Errorf("onvif %s: answer over %d bytes", u.Host, maxSOAP)
	}
	var envOut struct {
		Body struct {
			Fault *soapFault `xml:"Fault"`
			Inner []byte     `xml:",innerxml"`
		} `xml:"Body"`
	}
	if err := xml.Unmarshal(b, &envOut); err != nil {
		return fmt.Errorf("onvif %s: HTTP %d, not a SOAP answer: %w", u.Host, resp.StatusCode, err)
	}
	if f := envOut.Body.Fault; f != nil {
		code := f.Code
		if f.Subcode != "" {
			code += "/" + f.Subcode
		}
		return fmt.Errorf("onvif %s: fault %s: %s", u.Host, code, strings.TrimSpace(f.Reason))
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("onvif %s: HTTP %s", u.Host, resp.Status)
	}
	if out == nil {
		return nil
	}
	if err := xml.Unmarshal(envOut.Body.Inner, out); err != nil {
		return fmt.Errorf("onvif %s: answer: %w", u.Host, err)
	}
	return nil
}

type deviceInfo struct {
	Manufacturer    string `xml:"Manufacturer"`
	Model           string `xml:"Model"`
	FirmwareVersion string `xml:"FirmwareVersion"`
	SerialNumber    string `xml:"SerialNumber"`
	HardwareID      string `xml:"HardwareId"`
}

func (d *onvifDevice) deviceInfo(ctx context.Context) (map[string]any, error) {
	var di deviceInfo
	if err := d.soap(ctx, d.svc, `<GetDeviceInformation xmlns="`+nsDevice+`"/>`, &di, true); err != nil {
		return nil, err
	}
	return map[string]any{"Manufacturer": di.Manufacturer, "Model": di.Model, "FirmwareVersion": di.FirmwareVersion,
		"SerialNumber": di.SerialNumber, "HardwareId": di.HardwareID}, nil
}

type capabilities struct {
	Analytics string `xml:"Capabilities>Analytics>XAddr"`
	Device    string `xml:"Capabilities>Device>XAddr"`
	Events    string `xml:"Capabilities>Events>XAddr"`
	Imaging   string `xml:"Capabilities>Imaging>XAddr"`
	Media     string `xml:"Capabilities>Media>XAddr"`
	PTZ       string `xml:"Capabilities>PTZ>XAddr"`
}

func (c *capabilities) services() map[string]any {
	out := map[string]any{}
	for k, v := range map[string]string{"analytics": c.Analytics, "device": c.Device, "events": c.Events,
		"imaging": c.Imaging, "media": c.Media, "ptz": c.PTZ} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

func (d *onvifDevice) capabilities(ctx context.Context) (*capabilities, error) {
	var c capabilities
	err := d.soap(ctx, d.svc, `<GetCapabilities xmlns="`+nsDevice+`"><Category>All</Category></GetCapabilities>`, &c, true)
	return &c, err
}

// sameDevice returns the service at xaddr, on the device's own host: a
// device names its services with the address it believes it has (often
// wrong behind NAT), and the relay sends its credentials to the device
// it was configured with, nowhere else.
func (d *onvifDevice) sameDevice(xaddr string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(strings.Fields(xaddr + " ")[0]))
	if err != nil || u.Path == "" {
		return nil, fmt.Errorf("onvif: service address %q is not a URL", xaddr)
	}
	return &url.URL{Scheme: d.svc.Scheme, Host: d.svc.Host, Path: u.Path, RawQuery: u.RawQuery}, nil
}

func (d *onvifDevice) ping(ctx context.Context) bool {
	// GetSystemDateAndTime answers without credentials (ONVIF Core
	// 5.9.4.5): the device is there and speaks ONVIF.
	return d.soap(ctx, d.svc, `<GetSystemDateAndTime xmlns="`+nsDevice+`"/>`, nil, false) == nil
}

func (d *onvifDevice) grains(ctx context.Context) (map[string]any, error) {
	di, err := d.deviceInfo(ctx)
	if err != nil {
		return nil, err
	}
	g := map[string]any{"manufacturer": di["Manufacturer"], "model": di["Model"], "firmware_version": di["FirmwareVersion"],
		"serialnumber": di["SerialNumber"], "hardware_id": di["HardwareId"], "osrelease": di["FirmwareVersion"]}
	if c, err := d.capabilities(ctx); err == nil {
		g["onvif_services"] = c.services()
	}
	return g, nil
}

func (d *onvifDevice) call(ctx context.Context, fun string, a *args) (any, int, bool, error) {
	switch fun {
	case "onvif.device_info":
		r, err := d.deviceInfo(ctx)
		return r, 0, true, err
	case "onvif.capabilities":
		c, err := d.capabilities(ctx)
		if err != nil {
			return nil, 0, true, err
		}
		return c.services(), 0, true, nil
	case "onvif.reboot":
		var r struct {
			Message string `xml:"Message"`
		}
		err := d.soap(ctx, d.svc, `<SystemReboot xmlns="`+nsDevice+`"/>`, &r, true)
		return r.Message, 0, true, err
	case "onvif.set_ntp":
		r, err := d.setNTP(ctx, a)
		return r, 0, true, err
	case "onvif.snapshot_uri":
		r, err := d.snapshotURI(ctx, a)
		return r, 0, true, err
	}
	return nil, 0, false, nil
}

// setNTP sets the device's NTP servers: onvif.set_ntp servers (a list or
// comma-separated), or from_dhcp=True.
func (d *onvifDevice) setNTP(ctx context.Context, a *args) (any, error) {
	var servers []string
	v, _ := a.get(0, "servers")
	switch v := v.(type) {
	case string:
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				servers = append(servers, s)
			}
		}
	case []any:
		for _, s := range v {
			servers = append(servers, fmt.Sprint(s))
		}
	case nil:
	default:
		return nil, fmt.Errorf("onvif.set_ntp: servers must be a list or a comma-separated string, got %T", v)
	}
	fromDHCP := false
	if fd, ok := a.get(-1, "from_dhcp"); ok {
		fromDHCP = fd == true || fd == "True" || fd == "true"
	}
	if len(servers) == 0 && !fromDHCP {
		return nil, errors.New("onvif.set_ntp: give servers (a list) or from_dhcp=True")
	}
	if len(servers) > 16 {
		return nil, errors.New("onvif.set_ntp: at most 16 servers")
	}
	var b strings.Builder
	b.WriteString(`<SetNTP xmlns="` + nsDevice + `"><FromDHCP>` + strconv.FormatBool(fromDHCP) + `</FromDHCP>`)
	for _, s := range servers {
		b.WriteString(`<NTPManual>`)
		if ip, err := netip.ParseAddr(s); err == nil && ip.Is4() {
			b.WriteString(`<Type xmlns="` + nsSchema + `">IPv4</Type><IPv4Address xmlns="` + nsSchema + `">` + ip.String() + `</IPv4Address>`)
		} else if err == nil {
			b.WriteString(`<Type xmlns="` + nsSchema + `">IPv6</Type><IPv6Address xmlns="` + nsSchema + `">` + ip.String() + `</IPv6Address>`)
		} else {
			b.WriteString(`<Type xmlns="` + nsSchema + `">DNS</Type><DNSname xmlns="` + nsSchema + `">`)
			xml.EscapeText(&b, []byte(s))
			b.WriteString(`</DNSname>`)
		}
		b.WriteString(`</NTPManual>`)
	}
	b.WriteString(`</SetNTP>`)
	if err := d.soap(ctx, d.svc, b.String(), nil, true); err != nil {
		return nil, err
	}
	return map[string]any{"from_dhcp": fromDHCP, "servers": toAny(servers)}, nil
}

// snapshotURI returns the JPEG snapshot URI of a media profile (profile=
// token; default the first).
func (d *onvifDevice) snapshotURI(ctx context.Context, a *args) (any, error) {
	c, err := d.capabilities(ctx)
	if err != nil {
		return nil, err
	}
	if c.Media == "" {
		return nil, errors.New("onvif.snapshot_uri: the device has no media service")
	}
	media, err := d.sameDevice(c.Media)
	if err != nil {
		return nil, err
	}
	token, err := a.str(0, "profile", false)
	if err != nil {
		return nil, err
	}
	if token == "" {
		var p struct {
			Profiles []struct {
				Token string `xml:"token,attr"`
			} `xml:"Profiles"`
		}
		if err := d.soap(ctx, media, `<GetProfiles xmlns="`+nsMedia+`"/>`, &p, true); err != nil {
			return nil, err
		}
		if len(p.Profiles) == 0 {
			return nil, errors.New("onvif.snapshot_uri: the device has no media profile")
		}
		token = p.Profiles[0].Token
	}
	var r struct {
		URI string `xml:"MediaUri>Uri"`
	}
	var b strings.Builder
	b.WriteString(`<GetSnapshotUri xmlns="` + nsMedia + `"><ProfileToken>`)
	xml.EscapeText(&b, []byte(token))
	b.WriteString(`</ProfileToken></GetSnapshotUri>`)
	if err := d.soap(ctx, media, b.String(), &r, true); err != nil {
		return nil, err
	}
	return strings.TrimSpace(r.URI), nil
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Package proxytest holds simulated site devices for the tests of the
// relay's proxy minions: an ONVIF camera (SOAP 1.2 with WS-Security
// UsernameToken PasswordDigest, checked as a camera does) and a REST
// device, on loopback httptest servers.
package proxytest

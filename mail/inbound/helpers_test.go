package inbound_test

import (
	"bytes"
	"net"

	"github.com/emersion/go-smtp"
)

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// sendSMTP delivers raw as a sending mail server would.
func sendSMTP(addr, from, to string, raw []byte) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("mx.example.net"); err != nil {
		return err
	}
	if err := c.SendMail(from, []string{to}, bytes.NewReader(raw)); err != nil {
		return err
	}
	return c.Quit()
}

// Package mailtest checks rendered mail with a second, independent parser: Python's email package with policy.default.
//
// go-message both writes and, in most tests, reads our mail back, so a
// mistake it makes in both directions would go unseen; Python's parser is
// the independent reader. Tests need python3 on the PATH (the machines
// have it); without it they fail with a message, they do not skip.
package mailtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// script reads messages from stdin, each after a line with its length
// in bytes, and answers each with a line of JSON: every defect
// policy.default's parser found, in the message, its headers and its parts,
// the plain text and HTML bodies as Python decodes them, and its
// attachments; or, should the parser fail, the error. One process serves a
// test binary's every message: starting Python (through pyenv's shim here)
// cost 0.4 s a message.
const script = `
import email, email.policy, hashlib, json, sys

def parse(raw):
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    defects = []
    for part in msg.walk():
        defects += [type(d).__name__ + ": " + str(d) for d in part.defects]
        for name, value in part.items():
            defects += [name + ": " + type(d).__name__ + ": " + str(d) for d in getattr(value, "defects", [])]
    body = msg.get_body(preferencelist=("plain",))
    html = msg.get_body(preferencelist=("html",))
    files = []
    for part in msg.iter_attachments():
        content = part.get_payload(decode=True) or b""
        files.append({"filename": part.get_filename() or "", "content_type": part.get_content_type(),
                      "size": len(content), "sha256": hashlib.sha256(content).hexdigest()})
    return {
        "attachments": files,
        "defects": defects,
        "text": body.get_content() if body is not None else "",
        "html": html.get_content() if html is not None else "",
        "subject": str(msg.get("subject", "")),
    }

while True:
    size = sys.stdin.buffer.readline()
    if not size:
        break
    raw = sys.stdin.buffer.read(int(size))
    try:
        answer = parse(raw)
    except Exception as e:
        answer = {"error": type(e).__name__ + ": " + str(e)}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
`

// Parsed is what Python made of a message.
type Parsed struct {
	Defects []string `json:"defects"`
	Text    string   `json:"text"`
	HTML    string   `json:"html"`
	Subject string   `json:"subject"`
	// Attachments are the parts Python offers as files, in order.
	Attachments []File `json:"attachments"`
	// Error is why the parser failed, if it did.
	Error string `json:"error"`
}

// File is an attachment as Python reads it: its decoded file name, type,
// and the size and SHA-256 (hex) of its decoded bytes.
type File struct {
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
	SHA256      string `json:"sha256"`
}

// RequireNoDefects parses raw with Python's email package and fails the
// test on any defect; it returns what Python read.
func RequireNoDefects(tb testing.TB, raw []byte) Parsed {
	tb.Helper()
	out, err := python.parse(raw)
	if err != nil {
		tb.Fatalf("python3 could not parse the mail (python3 must be on the PATH): %v\n%s", err, raw)
	}
	var p Parsed
	if err := json.Unmarshal(out, &p); err != nil {
		tb.Fatalf("python3 answered %q: %v", out, err)
	}
	if p.Error != "" {
		tb.Fatalf("Python's email parser failed: %s\n%s", p.Error, raw)
	}
	if len(p.Defects) > 0 {
		tb.Errorf("Python's email parser found defects %q in:\n%s", p.Defects, raw)
	}
	return p
}

// python is the test binary's one Python process, started by its first
// message and ended with the binary (its stdin closes).
var python parser

type parser struct {
	mu  sync.Mutex
	in  io.Writer
	out *bufio.Reader
	err error // why the process cannot serve
}

// parse sends raw to the process and returns its answer, one message at a
// time.
func (p *parser) parse(raw []byte) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.in == nil && p.err == nil {
		p.err = p.start()
	}
	if p.err != nil {
		return nil, p.err
	}
	if _, err := fmt.Fprintf(p.in, "%d\n%s", len(raw), raw); err != nil {
		p.err = fmt.Errorf("write to python3 (its words are in the test binary's output): %w", err)
		return nil, p.err
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		p.err = fmt.Errorf("read from python3 (its words are in the test binary's output): %w", err)
		return nil, p.err
	}
	return line, nil
}

func (p *parser) start() error {
	cmd := exec.Command("python3", "-c", script)
	cmd.Stderr = os.Stderr // a traceback shows beside the failing test
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.in, p.out = in, bufio.NewReader(out)
	return nil
}

// Package mailtest checks rendered mail with a second, independent parser: Python's email package with policy.default.
//
// go-message both writes and, in most tests, reads our mail back, so a
// mistake it makes in both directions would go unseen; Python's parser is
// the independent reader. Tests need python3 on the PATH (the machines
// have it); without it they fail with a message, they do not skip.
package mailtest

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// script parses stdin with policy.default and reports every defect the
// parser found, in the message, its headers and its parts, and the plain
// text and HTML bodies as Python decodes them.
const script = `
import email, email.policy, hashlib, json, sys
msg = email.message_from_bytes(sys.stdin.buffer.read(), policy=email.policy.default)
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
print(json.dumps({
    "attachments": files,
    "defects": defects,
    "text": body.get_content() if body is not None else "",
    "html": html.get_content() if html is not None else "",
    "subject": str(msg.get("subject", "")),
}))
`

// Parsed is what Python made of a message.
type Parsed struct {
	Defects []string `json:"defects"`
	Text    string   `json:"text"`
	HTML    string   `json:"html"`
	Subject string   `json:"subject"`
	// Attachments are the parts Python offers as files, in order.
	Attachments []File `json:"attachments"`
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
	cmd := exec.Command("python3", "-c", script)
	cmd.Stdin = bytes.NewReader(raw)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("python3 could not parse the mail (python3 must be on the PATH): %v\n%s\n%s", err, stderr.String(), raw)
	}
	var p Parsed
	if err := json.Unmarshal(out, &p); err != nil {
		tb.Fatalf("python3 answered %q: %v", out, err)
	}
	if len(p.Defects) > 0 {
		tb.Errorf("Python's email parser found defects %q in:\n%s", p.Defects, raw)
	}
	return p
}

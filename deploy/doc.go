// Package deploy holds what running helpdesk for real needs beside the binary (a systemd unit, a Containerfile, a compose file, reverse-proxy examples, the development settings of make run) and the test that follows docs/deploy.md with them.
//
// It is a folder of its own because these files are a deployment's, not
// the code's: they are what an operator copies, and the test keeps them
// true (the unit passes systemd-analyze verify, the container files parse,
// and the documented steps take a mail in and a reply out).
package deploy

// Command mcpecho is an MCP server over stdio with one tool, echo, for the
// tests of sessions with MCP servers (see package mcpecho).
package main

import (
	"fmt"
	"os"

	"github.com/seed5ad92d46/sous/internal/mcpecho"
)

func main() {
	if err := mcpecho.ServeStdio(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

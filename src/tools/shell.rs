//! The shell tool: runs a command line in the workspace under the sandbox.

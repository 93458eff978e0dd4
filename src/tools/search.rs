//! list_dir, glob and grep over the workspace.

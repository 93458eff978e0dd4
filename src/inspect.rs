//! Commands that inspect state, a module each: `sessions`, `runs`, `tape`,
//! `context`, `channels` (the outbox), `verify` (through `Audit`), `doctor`,
//! `trust`, `skills`, `plugins` (`pincer plugin`), `store` (`pincer store`),
//! and `config show` here.

mod channels;
mod context;
mod doctor;
mod pairs;
mod plugins;
mod runs;
mod schedule;
mod send;
mod sessions;
mod skills;
mod store;
mod tape;
mod trust;
mod verify;

pub use channels::channels;
pub use context::context;
pub use doctor::doctor;
pub use plugins::plugin;
pub use runs::runs;
pub use schedule::schedule;
pub use send::send;
pub use sessions::sessions;
pub use skills::skills;
pub use store::store;
pub use tape::tape;
pub use trust::trust;
pub use verify::verify;

use crate::app::{Failure, Flags, exit};

/// The directory named, or the current one, canonical (`pincer trust`,
/// `pincer skills --cwd`).
fn directory(path: Option<&std::path::Path>) -> Result<std::path::PathBuf, Failure> {
    let dir = match path {
        Some(path) => path.to_path_buf(),
        None => std::env::current_dir().map_err(|err| {
            Failure::failed(anyhow::anyhow!("cannot read the current directory: {err}"))
        })?,
    };
    dir.canonicalize()
        .map_err(|err| Failure::usage(anyhow::anyhow!("{}: {err}", dir.display())))
}

/// Writes a command's answer to stdout.
fn print(text: &str) -> Result<(), Failure> {
    crate::stdout::write_all(text.as_bytes()).map_err(Failure::failed)
}

/// `pincer config show`: the configuration with each value's origin.
pub fn config_show(flags: &Flags) -> Result<u8, Failure> {
    let config = crate::app::load_config(flags).map_err(Failure::usage)?;
    print(&config.render().map_err(Failure::usage)?)?;
    Ok(exit::OK)
}

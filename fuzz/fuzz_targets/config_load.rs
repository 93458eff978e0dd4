//! The config loader: any file is loaded or refused with an error that names
//! what is wrong in bounded space — however long the values it quotes — and
//! without a trailing period; a loaded configuration renders.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pincer::config::{Config, Flags};
use pincer::core::quote::MESSAGE_BYTES;

struct Place {
    _dir: tempfile::TempDir,
    file: PathBuf,
    data: PathBuf,
    home: String,
}

fn place() -> &'static Place {
    static PLACE: OnceLock<Place> = OnceLock::new();
    PLACE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
        let home = dir.path().join("home");
        Place {
            file: dir.path().join("config.toml"),
            data: dir.path().join("data"),
            home: home.to_string_lossy().into_owned(),
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let place = place();
    std::fs::write(&place.file, data).unwrap_or_else(|err| panic!("{err}"));
    let flags = Flags {
        config: Some(place.file.clone()),
        data_dir: Some(place.data.clone()),
        ..Flags::default()
    };
    let env = |name: &str| (name == "HOME").then(|| place.home.clone());
    match Config::load_with(&flags, &env) {
        Ok(config) => {
            // The file is UTF-8 and its directory too: every section renders.
            if let Err(err) = config.render() {
                panic!("a loaded configuration that does not render: {err}");
            }
        }
        Err(err) => {
            let text = err.to_string();
            let bound = place.file.as_os_str().len() + 2 * MESSAGE_BYTES;
            assert!(
                text.len() <= bound,
                "an error of {} bytes for a file of {}: {:.300}",
                text.len(),
                data.len(),
                text
            );
            assert!(!text.ends_with('.'), "an error ending in a period: {text}");
        }
    }
});

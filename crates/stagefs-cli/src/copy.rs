//! Copies between the host and an image: files and whole trees, both ways.

use std::path::Path;

use stagefs_core::Kind;

use crate::volume::{self, say, Vol};

/// Copies host file or directory `from` to image path `to` (a directory with `recursive`).
pub fn into_image(v: &mut Vol<'_>, from: &Path, to: &str, recursive: bool) -> Result<u64, String> {
    let meta = std::fs::metadata(from).map_err(|e| format!("{}: {e}", from.display()))?;
    if meta.is_dir() {
        if !recursive {
            return Err(format!("{} is a directory (use -r)", from.display()));
        }
        if to != "/" {
            match v.metadata(to) {
                Ok(m) if m.kind == Kind::Dir => {}
                Ok(_) => return Err(format!("{to}: exists and is not a directory")),
                Err(stagefs_core::Error::NotFound) => v.create_dir(to).map_err(|e| say(to, e))?,
                Err(e) => return Err(say(to, e)),
            }
        }
        let mut entries: Vec<_> = std::fs::read_dir(from)
            .map_err(|e| format!("{}: {e}", from.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", from.display()))?;
        entries.sort_by_key(|e| e.file_name());
        let mut files = 0;
        for e in entries {
            let name = e.file_name();
            let name = name
                .to_str()
                .ok_or_else(|| format!("{}: name is not UTF-8", e.path().display()))?;
            files += into_image(v, &e.path(), &volume::join(to, name), true)?;
        }
        Ok(files)
    } else if meta.is_file() {
        let data = std::fs::read(from).map_err(|e| format!("{}: {e}", from.display()))?;
        volume::write_file(v, to, &data).map_err(|e| say(to, e))?;
        Ok(1)
    } else {
        Err(format!("{}: not a file or directory", from.display()))
    }
}

/// Copies image path `from` to host path `to` (a directory with `recursive`).
pub fn out_of_image(
    v: &mut Vol<'_>,
    from: &str,
    to: &Path,
    recursive: bool,
) -> Result<u64, String> {
    let m = v.metadata(from).map_err(|e| say(from, e))?;
    if m.kind == Kind::Dir {
        if !recursive {
            return Err(format!("{from} is a directory (use -r)"));
        }
        std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
        let mut files = 0;
        for (name, _) in volume::list(v, from).map_err(|e| say(from, e))? {
            files += out_of_image(v, &volume::join(from, &name), &to.join(&name), true)?;
        }
        Ok(files)
    } else {
        let data = volume::read_file(v, from).map_err(|e| say(from, e))?;
        std::fs::write(to, data).map_err(|e| format!("{}: {e}", to.display()))?;
        Ok(1)
    }
}

/// Removes image path `path` (a non-empty directory only with `recursive`).
pub fn remove(v: &mut Vol<'_>, path: &str, recursive: bool) -> Result<(), String> {
    let m = v.metadata(path).map_err(|e| say(path, e))?;
    if m.kind == Kind::File {
        return v.remove(path).map_err(|e| say(path, e));
    }
    if recursive {
        for (name, _) in volume::list(v, path).map_err(|e| say(path, e))? {
            remove(v, &volume::join(path, &name), true)?;
        }
    }
    v.remove_dir(path).map_err(|e| say(path, e))
}

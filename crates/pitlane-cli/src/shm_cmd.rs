//! `pitlane shm`: make, inspect, check, recover and remove file-backed slabs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use pitlane_slab::{Config, ShmSlab};

use crate::UsageError;

/// Arguments of `pitlane shm`.
#[derive(Args, Debug)]
pub struct ShmArgs {
    #[command(subcommand)]
    command: ShmCommand,
}

#[derive(Subcommand, Debug)]
enum ShmCommand {
    /// Create a slab file (it must not exist; links are not followed).
    Create {
        /// Path of the new file.
        path: PathBuf,
        /// Bytes per object.
        #[arg(long, value_name = "N")]
        object_size: String,
        /// Number of objects.
        #[arg(long, value_name = "N")]
        capacity: String,
        /// Permission bits, in octal, at most 0777 (no set-user-ID, set-group-ID or sticky bit).
        #[arg(long, default_value = "0600")]
        mode: String,
        /// Alignment of each object (a power of two up to 4096); by default 8, or the object size
        /// rounded up to a power of two if that is less.
        #[arg(long, value_name = "N")]
        align: Option<String>,
        /// Sub-freelists (1 to 64).
        #[arg(long, value_name = "N", default_value = "8")]
        shards: String,
        /// The caller's tag for what the objects hold.
        #[arg(long, value_name = "N", default_value = "0")]
        type_tag: String,
    },
    /// Show a slab's configuration, usage and attached handles.
    Info {
        /// The slab file.
        path: PathBuf,
    },
    /// Check the freelists and owners (exact when nothing allocates meanwhile); exit 1 if inconsistent.
    Check {
        /// The slab file.
        path: PathBuf,
    },
    /// Return the objects of dead owners to the freelist.
    Recover {
        /// The slab file.
        path: PathBuf,
    },
    /// Remove a slab file (refused while another handle is attached).
    Rm {
        /// The slab file.
        path: PathBuf,
    },
}

fn number<T: std::str::FromStr>(what: &str, text: &str) -> Result<T, UsageError> {
    text.parse()
        .map_err(|_| UsageError(format!("--{what} must be a number, got {text:?}")))
}

fn open(path: &PathBuf) -> Result<ShmSlab, UsageError> {
    ShmSlab::open_any(path).map_err(|e| UsageError(format!("{}: {e}", path.display())))
}

/// Runs `pitlane shm`.
pub fn run(args: ShmArgs) -> Result<ExitCode, UsageError> {
    match args.command {
        ShmCommand::Create {
            path,
            object_size,
            capacity,
            mode,
            align,
            shards,
            type_tag,
        } => {
            let mode = u32::from_str_radix(mode.trim_start_matches("0o"), 8)
                .map_err(|_| UsageError(format!("--mode must be octal, got {mode:?}")))?;
            let mut config = Config::new(
                number("object-size", &object_size)?,
                number("capacity", &capacity)?,
            )
            .with_shards(number("shards", &shards)?)
            .with_type_tag(number("type-tag", &type_tag)?);
            if let Some(align) = align {
                config = config.with_align(number("align", &align)?);
            }
            let slab = ShmSlab::create_with_mode(&path, config, mode)
                .map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
            println!(
                "created {} ({} bytes): {}",
                path.display(),
                slab.region_len(),
                slab.config()
            );
            Ok(ExitCode::SUCCESS)
        }
        ShmCommand::Info { path } => {
            let slab = open(&path)?;
            let report = slab.check();
            let attached = slab
                .attached()
                .map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
            println!("{}", path.display());
            println!("  format version {}", pitlane_slab::FORMAT_VERSION);
            println!("  {}", slab.config());
            println!("  region {} bytes", slab.region_len());
            println!(
                "  handed out {}, free (listed) {}, owned {}, never used {}",
                report.bumped,
                report.free_listed,
                report.owned,
                report.capacity - report.bumped
            );
            println!("  attached handles: {} (this one included)", attached.len());
            Ok(ExitCode::SUCCESS)
        }
        ShmCommand::Check { path } => {
            let slab = open(&path)?;
            let report = slab.check();
            println!("{report}");
            Ok(if report.is_consistent() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        ShmCommand::Recover { path } => {
            let slab = open(&path)?;
            let r = slab
                .recover()
                .map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
            println!(
                "reclaimed {} objects of dead owners ({} of them in flight when their process \
                 died); {} handles attached (this one included)",
                r.reclaimed, r.in_flight, r.live_slots
            );
            Ok(ExitCode::SUCCESS)
        }
        ShmCommand::Rm { path } => {
            let slab = open(&path)?;
            let attached = slab
                .attached()
                .map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
            if attached.len() > 1 {
                return Err(UsageError(format!(
                    "{}: {} other handles are attached; not removed",
                    path.display(),
                    attached.len() - 1
                )));
            }
            drop(slab);
            std::fs::remove_file(&path)
                .map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
            println!("removed {}", path.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

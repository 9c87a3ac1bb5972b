//! `FileSystem` methods that pass straight through to `RealFs`, for the
//! tests' file systems that change one or two calls of the real one:
//! `real_fs_methods!(read_all rename remove ...)` inside an
//! `impl FileSystem` writes those methods, the test writes the rest.

/// One `FileSystem` method of `RealFs`, by name.
#[allow(unused_macros)] // Not every test binary wraps a file system.
macro_rules! real_fs_method {
    (create) => {
        fn create(
            &self,
            path: &::std::path::Path,
        ) -> ::bloomlsm::fs::FsResult<Box<dyn ::bloomlsm::sstable::WritableFile>> {
            ::bloomlsm::fs::FileSystem::create(&::bloomlsm::fs::RealFs, path)
        }
    };
    (append_at) => {
        fn append_at(
            &self,
            path: &::std::path::Path,
            len: u64,
        ) -> ::bloomlsm::fs::FsResult<Box<dyn ::bloomlsm::sstable::WritableFile>> {
            ::bloomlsm::fs::FileSystem::append_at(&::bloomlsm::fs::RealFs, path, len)
        }
    };
    (overwrite) => {
        fn overwrite(
            &self,
            path: &::std::path::Path,
            offset: u64,
            bytes: &[u8],
        ) -> ::bloomlsm::fs::FsResult<()> {
            ::bloomlsm::fs::FileSystem::overwrite(&::bloomlsm::fs::RealFs, path, offset, bytes)
        }
    };
    (open_read) => {
        fn open_read(
            &self,
            path: &::std::path::Path,
        ) -> ::bloomlsm::fs::FsResult<::std::sync::Arc<dyn ::bloomlsm::sstable::RandomAccessFile>> {
            ::bloomlsm::fs::FileSystem::open_read(&::bloomlsm::fs::RealFs, path)
        }
    };
    (open_read_direct) => {
        fn open_read_direct(
            &self,
            path: &::std::path::Path,
        ) -> ::bloomlsm::fs::FsResult<::std::sync::Arc<dyn ::bloomlsm::sstable::RandomAccessFile>> {
            ::bloomlsm::fs::FileSystem::open_read_direct(&::bloomlsm::fs::RealFs, path)
        }
    };
    (read_all) => {
        fn read_all(&self, path: &::std::path::Path) -> ::bloomlsm::fs::FsResult<Vec<u8>> {
            ::bloomlsm::fs::FileSystem::read_all(&::bloomlsm::fs::RealFs, path)
        }
    };
    (rename) => {
        fn rename(
            &self,
            from: &::std::path::Path,
            to: &::std::path::Path,
        ) -> ::bloomlsm::fs::FsResult<()> {
            ::bloomlsm::fs::FileSystem::rename(&::bloomlsm::fs::RealFs, from, to)
        }
    };
    (remove) => {
        fn remove(&self, path: &::std::path::Path) -> ::bloomlsm::fs::FsResult<()> {
            ::bloomlsm::fs::FileSystem::remove(&::bloomlsm::fs::RealFs, path)
        }
    };
    (list) => {
        fn list(&self, dir: &::std::path::Path) -> ::bloomlsm::fs::FsResult<Vec<String>> {
            ::bloomlsm::fs::FileSystem::list(&::bloomlsm::fs::RealFs, dir)
        }
    };
    (create_dir_all) => {
        fn create_dir_all(&self, dir: &::std::path::Path) -> ::bloomlsm::fs::FsResult<()> {
            ::bloomlsm::fs::FileSystem::create_dir_all(&::bloomlsm::fs::RealFs, dir)
        }
    };
    (remove_dir) => {
        fn remove_dir(&self, dir: &::std::path::Path) -> ::bloomlsm::fs::FsResult<()> {
            ::bloomlsm::fs::FileSystem::remove_dir(&::bloomlsm::fs::RealFs, dir)
        }
    };
    (sync_dir) => {
        fn sync_dir(&self, dir: &::std::path::Path) -> ::bloomlsm::fs::FsResult<()> {
            ::bloomlsm::fs::FileSystem::sync_dir(&::bloomlsm::fs::RealFs, dir)
        }
    };
    (exists) => {
        fn exists(&self, path: &::std::path::Path) -> bool {
            ::bloomlsm::fs::FileSystem::exists(&::bloomlsm::fs::RealFs, path)
        }
    };
    (lock) => {
        fn lock(
            &self,
            path: &::std::path::Path,
        ) -> ::bloomlsm::fs::FsResult<Option<Box<dyn ::bloomlsm::fs::DirLock>>> {
            ::bloomlsm::fs::FileSystem::lock(&::bloomlsm::fs::RealFs, path)
        }
    };
    (lock_shared) => {
        fn lock_shared(
            &self,
            path: &::std::path::Path,
        ) -> ::bloomlsm::fs::FsResult<Option<Box<dyn ::bloomlsm::fs::DirLock>>> {
            ::bloomlsm::fs::FileSystem::lock_shared(&::bloomlsm::fs::RealFs, path)
        }
    };
}

/// The named `FileSystem` methods of `RealFs` (see the module doc).
#[allow(unused_macros)] // Not every test binary wraps a file system.
macro_rules! real_fs_methods {
    ($($method:ident)*) => {
        $( $crate::common::real_fs_methods::real_fs_method!($method); )*
    };
}

#[allow(unused_imports)] // Not every test binary wraps a file system.
pub(crate) use {real_fs_method, real_fs_methods};

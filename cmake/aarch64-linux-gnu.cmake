# Cross-compiling for AArch64 Linux boards with Debian's cross toolchain
# (g++-aarch64-linux-gnu) and the arm64 libraries of Debian's multiarch
# (libabsl-dev:arm64, libssl-dev:arm64; scripts/install-deps installs them).
# scripts/build configures build/aarch64 with it and KILN_BOARD_ONLY=ON: the
# deploy runtime, kiln-run and kiln-board, nothing that needs LLVM or gRPC.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Multiarch: arm64 libraries in /usr/lib/aarch64-linux-gnu, headers shared
# in /usr/include; programs (protoc, ...) are the host's.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# Under qemu, the multiarch loader and libraries (as the binaries link them).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/)
# Debian's arm64 OpenSSL (FindOpenSSL would take the host's first), and the
# arch-specific half of multiarch headers (openssl/configuration.h).
set(OPENSSL_INCLUDE_DIR /usr/include CACHE PATH "")
set(OPENSSL_CRYPTO_LIBRARY /usr/lib/aarch64-linux-gnu/libcrypto.so CACHE FILEPATH "")
set(OPENSSL_SSL_LIBRARY /usr/lib/aarch64-linux-gnu/libssl.so CACHE FILEPATH "")
set(CMAKE_C_FLAGS_INIT "-isystem /usr/include/aarch64-linux-gnu")
set(CMAKE_CXX_FLAGS_INIT "-isystem /usr/include/aarch64-linux-gnu")

// The C++ operators new and delete of pitlane-malloc, as a C++ program sees them: every form
// (plain, array, sized delete, aligned, nothrow), and failure (std::bad_alloc, or nullptr for
// the nothrow forms, after the new-handler had its say). Prints "ok <n> checks" and exits 0.
#include <dlfcn.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

static int checks;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            std::exit(1);                                                            \
        }                                                                            \
    } while (0)

struct alignas(256) Wide {
    unsigned char bytes[300];
};

static int handler_calls;
static void give_up() {
    handler_calls++;
    std::set_new_handler(nullptr);  // the next failure throws
}

int main() {
    auto version = reinterpret_cast<const char *(*)()>(dlsym(RTLD_DEFAULT, "pitlane_malloc_version"));
    if (version == nullptr) {
        std::fprintf(stderr, "pitlane-malloc is not the malloc in use\n");
        return 2;
    }
    // Plain and array forms, with sized deletes (C++14) where the compiler emits them.
    for (int n = 1; n < 5000; n = n * 2 + 1) {
        auto *one = new std::string(static_cast<size_t>(n), 'x');
        CHECK(one->size() == static_cast<size_t>(n));
        delete one;
        auto *many = new int[n];
        for (int i = 0; i < n; i++) many[i] = i;
        CHECK(many[n - 1] == n - 1);
        delete[] many;
    }
    // Aligned forms (C++17), single and array.
    for (int round = 0; round < 100; round++) {
        auto *w = new Wide;
        CHECK(reinterpret_cast<std::uintptr_t>(w) % 256 == 0);
        std::memset(w->bytes, 1, sizeof w->bytes);
        delete w;
        auto *ws = new Wide[3];
        CHECK(reinterpret_cast<std::uintptr_t>(ws) % 256 == 0);
        delete[] ws;
    }
    void *raw = ::operator new(100, std::align_val_t(4096));
    CHECK(reinterpret_cast<std::uintptr_t>(raw) % 4096 == 0);
    ::operator delete(raw, 100, std::align_val_t(4096));
    raw = ::operator new[](10, std::align_val_t(64), std::nothrow);
    CHECK(raw != nullptr && reinterpret_cast<std::uintptr_t>(raw) % 64 == 0);
    ::operator delete[](raw, std::align_val_t(64), std::nothrow);

    // Containers moving blocks between threads.
    std::vector<std::unique_ptr<std::vector<int>>> blocks;
    std::thread maker([&] {
        for (int i = 0; i < 10000; i++) blocks.push_back(std::make_unique<std::vector<int>>(i % 100, i));
    });
    maker.join();
    std::thread freer([&] { blocks.clear(); });
    freer.join();

    // Failure: nothrow forms give nullptr; the throwing forms call the new-handler, then
    // throw std::bad_alloc.
    const size_t too_big = SIZE_MAX / 2;
    CHECK(::operator new(too_big, std::nothrow) == nullptr);
    CHECK(::operator new[](too_big, std::nothrow) == nullptr);
    CHECK(::operator new(too_big, std::align_val_t(64), std::nothrow) == nullptr);
    bool threw = false;
    try {
        void *never = ::operator new(too_big);
        ::operator delete(never);
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    CHECK(threw);
    threw = false;
    std::set_new_handler(give_up);
    try {
        void *never = ::operator new[](too_big, std::align_val_t(128));
        ::operator delete[](never, std::align_val_t(128));
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    CHECK(threw && handler_calls == 1);
    std::printf("ok %d checks (%s)\n", checks, version());
    return 0;
}

#include <cstdio>
int main() { std::puts("brrr"); return 0; }

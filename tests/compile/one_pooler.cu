#include "one_pooler.cpp"

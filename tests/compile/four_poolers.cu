#include "four_poolers.cpp"

int main() { return 1; }  // placeholder, replaced by the component

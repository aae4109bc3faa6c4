// placeholder so the library has a source; removed when the component lands
